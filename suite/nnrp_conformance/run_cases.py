"""Running the plan's cases on the run's sessions, and what the endpoint showed across cases.

Owns, for :class:`~nnrp_conformance.session.ConformanceCore` (a mixin: the core holds the
portal, the options and the plan):

* **which session a case runs on** (docs/verdicts.md#one-defect-one-failure): the run's
  session, or a fresh one when the last case left an operation the endpoint never ended on it
  (a cancel it never answered, a stream it never ended) or the session dropped, or when a
  generated repeat asks for a session of its own (``another-session``: the relations are judged
  across sessions, ``generate/repeats.py``), or a group puts an operation on another session
  (``session: another``): the group then runs on two sessions opened for it, which start
  alike, and the second is closed after it (docs/recipes.md#across-sessions). The leaving case is
  the one that reports it (``diagnostics.left_open`` / ``session_dropped``); the next case
  never starts beside its leftovers, so an endpoint with a limit of operations per session
  fails the leaking case and nothing else. **Blame follows the session**: a case the
  endpoint refuses (an error before any output that names a limit, an overload or
  scheduling, ``checks/refusals.py``) on a session that holds operations other cases left
  open names those cases (``diagnostics.left_open_earlier``): the refusal may follow from
  them. Only the operations left on that very session count (a batch's own, under
  ``--concurrency``); a case on a fresh session never carries the note, and an error that
  is not a refusal (a context-length error) never does.
* **liveness**: the operations in a row that got no frame at all. After
  ``unresponsive_after`` of them, one discovery operation on a fresh session says whether the
  endpoint still answers: a frame, and the run goes on (the silence was the sessions' that
  earlier cases killed, each charged to its own case: an endpoint that silently drops the
  session on some requests is not unresponsive); nothing, and the remaining cases fail at once
  (``endpoint.unresponsive``).
* **the idle limit each case gets**: the run's :class:`~nnrp_conformance.pace.Pace`, fed
  every result (``pace.py``, docs/verdicts.md#bounds).
* refused frames no case owns, noted on the case that saw them.
* **answers across operations**: each case's answer ids against the earlier operations'
  (``checks/answer_ids.py``: two different requests never get the same id), and a generated
  request's answer against the answer of the request it repeats (``checks/same_answers.py``).
* **a case refused in a ``--concurrency`` batch** runs again alone after the batch (on a fresh
  session when the batch left operations open) and is judged on that run
  (``concurrency.judged_alone``): which cases an endpoint over its limit refuses is a race.
  So does a batch case whose operation the session never ended (``left_open`` or
  ``session_dropped``), each on a fresh session (``concurrency.judged_alone_after_loss``): an
  endpoint that drops the session leaves every operation beside the culprit unended, and only
  a lone run says which case did it.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any

from nnrp_conformance import case_results, concurrency, contract, runner
from nnrp_conformance.checks.answer_ids import AnswerIds
from nnrp_conformance.checks.refusals import refusal_named
from nnrp_conformance.checks.same_answers import CHANGE_ANOTHER_SESSION, SameAnswers
from nnrp_conformance.options import RunOptions
from nnrp_conformance.pace import Pace
from nnrp_conformance.recipes import SESSION_ANOTHER

__all__ = ["CaseSessions"]

class CaseSessions:
    """The case-running half of the run core (module doc)."""

    options: RunOptions
    manifest: Any
    capabilities: dict[str, Any] | None
    _client: Any
    twin: Any  # --nnrp-http-twin (twin/): every request also asked over HTTP, or None

    def _init_case_sessions(self) -> None:
        # run-level liveness: the operations in a row the endpoint answered with no frame,
        # and the last frame it did send (message type, during what, wall time)
        self._silent: list[str] = []
        self._last_seen: str | None = None
        # the receive time of the last refused frame already shown on a case's result
        self._refusals_shown_ns = 0
        # why the next case needs a fresh session (None: the current one is clean)
        self._fresh_needed: str | None = None
        # cases whose operations the endpoint never ended on the current session, in run
        # order (emptied when a fresh session opens: blame follows the session)
        self._left_open: list[str] = []
        # the endpoint gave no frame on a fresh session either: every later case fails at once
        self._endpoint_silent = False
        # the pace the endpoint has shown: the idle limit each case gets (pace.py)
        self._pace = Pace(float(self.options.idle_timeout))
        self.sessions_opened = 0
        # the answer ids seen so far, with the request each answered (checks/answer_ids.py)
        self._answer_ids = AnswerIds()
        # a request and its repeats' (same_answers.py), a broken pair sent over HTTP too
        self._same_answers = SameAnswers(self._pair_over_http)

    # provided by the core
    @property
    def client(self) -> Any:
        raise NotImplementedError

    @property
    def portal(self) -> Any:
        raise NotImplementedError

    def connect(self) -> Any:
        raise NotImplementedError

    def open_session(self) -> Any:
        raise NotImplementedError

    # --- cases -------------------------------------------------------------------------
    def run_case(self, case: Any, *, timeout: float | None = None, force: bool = False,
                 idle_timeout: float | None = None) -> Any:
        """Run one planned case; a case the plan did not select comes back as a skipped
        result unless ``force`` (an explicit request, e.g. ``nnrp_recipe_runner``);
        ``idle_timeout`` caps the idle limit it gets (a shrinking try of a case that silences
        the session: ``generate/run.py``)."""
        if case.selection != contract.SEL_SELECTED and not force:
            return case_results.skipped_result(case)
        if not self._still_answers():
            return case_results.unresponsive_result(case, self.unresponsive_reason())
        self._own_session([case])
        across = any(c.session == SESSION_ANOTHER for c in case.companions)
        if across:
            # both sessions opened for the group start alike, as two clients that just
            # connected do: what an endpoint numbers per session (frame ids, its counters)
            # is then the same on both, which is where state shared between sessions shows
            self._fresh_needed = self._fresh_needed or \
                f"{case.id} runs on two sessions opened for it"
        fresh = self._fresh_session()
        if fresh is not None:
            return case_results.unresponsive_result(case, fresh)
        before = self.client.frames_received
        run = self._run_options(timeout, idle_timeout, [case, *case.companions])
        if case.companions:  # a concurrency recipe: its operations in flight together
            cases = [case, *case.companions]
            try:
                other = self.open_session() if across else None
            except Exception as exc:  # the run's own session opened: this case's evidence
                return case_results.unresponsive_result(
                    case, f"cannot open a second session for the group: {exc}")
            try:
                results, overlap = self.portal.call(functools.partial(
                    concurrency.run_group, self.client, cases, other_client=other, **run))
                if other is not None:
                    overlap["other_session"] = _other_session(other, cases, results)
            finally:
                if other is not None:  # bounded (NnrpClient.aclose); its operations end there
                    with contextlib.suppress(Exception):
                        self.portal.call(other.aclose)
            result = concurrency.group_result(case, results, overlap,
                                              strict=self.options.strict)
        else:
            results = [self.portal.call(
                functools.partial(runner.run_case, self.client, case, **run))]
            result = results[0]
        self._note_frames(before, case.id)
        self._note_refusals(result)
        # what the other session held was closed with it: no later case meets it
        self._after(result, [r for c, r in zip([case, *case.companions], results, strict=True)
                             if c.session != SESSION_ANOTHER], also_paced=results)
        self._blame([result])
        return self._relate(case, result)

    def run_batch(self, cases: list[Any], *, timeout: float | None = None) -> list[Any]:
        """``--concurrency N``: run ``cases`` (selected, none a concurrency recipe) in flight
        together, each judged as usual plus the cross-operation rules (concurrency.py)."""
        if not self._still_answers():
            return [case_results.unresponsive_result(c, self.unresponsive_reason())
                    for c in cases]
        self._own_session(cases)
        fresh = self._fresh_session()
        if fresh is not None:
            return [case_results.unresponsive_result(c, fresh) for c in cases]
        before = self.client.frames_received
        results = self.portal.call(functools.partial(
            concurrency.run_batch, self.client, cases, **self._run_options(timeout, None, cases)))
        self._note_frames(before, ", ".join(c.id for c in cases))
        if results:  # several operations settled together: a refusal is the batch's evidence
            self._note_refusals(results[-1])
        for result in results:
            self._after(result, [result])
        self._blame(results)  # the batch's operations shared one session, in any order
        results = [self._relate(c, r) for c, r in zip(cases, results, strict=True)]
        # a refused case is run again alone, after the batch (on a fresh session when the batch
        # left operations open): which cases are refused is a race (concurrency.judged_alone);
        # a case whose operation the session never ended runs again alone on a fresh session:
        # which of the batch caused it only a lone run can say (judged_alone_after_loss)
        judged = []
        for case, result in zip(cases, results, strict=True):
            if concurrency.refused_in_batch(result):
                result = concurrency.judged_alone(result, self.run_case(case, timeout=timeout))
            elif concurrency.lost_in_batch(result):
                self._fresh_needed = self._fresh_needed or \
                    f"{result.id} runs again alone after its batch lost its operation"
                result = concurrency.judged_alone_after_loss(
                    result, self.run_case(case, timeout=timeout))
            judged.append(result)
        return judged

    def _relate(self, case: Any, result: Any) -> Any:
        """``result`` judged against the answers of the run's earlier operations, on this
        session and the ones before it (the session's number: ``sessions_opened``)."""
        result = self._answer_ids.judge(case, result, strict=self.options.strict,
                                        session=self.sessions_opened)
        return self._same_answers.judge(case, result, strict=self.options.strict,
                                        session=self.sessions_opened)

    def _pair_over_http(self, operation: str, first: Any, second: Any) -> dict[str, Any] | None:
        """The twin's second HTTP call (``twin/pairs.py``): both bodies of a broken relation
        (None: the run has no twin)."""
        if self.twin is None:
            return None
        return dict(self.portal.call(functools.partial(self.twin.pair, operation, first, second)))

    def _own_session(self, cases: list[Any]) -> None:
        """A generated repeat sent on a session of its own (``generate/repeats.py``'s
        ``another-session``) gets a fresh one: the relations are judged across sessions."""
        for case in cases:
            generated = getattr(case.recipe, "data", {}).get("generated") \
                if getattr(case, "recipe", None) is not None else None
            repeats = generated.get("repeats") if isinstance(generated, dict) else None
            if isinstance(repeats, dict) and repeats.get("change") == CHANGE_ANOTHER_SESSION:
                self._fresh_needed = self._fresh_needed or \
                    f"{case.id} repeats {repeats.get('case')} on a session of its own"
                return

    def _run_options(self, timeout: float | None, idle_timeout: float | None = None,
                     cases: list[Any] | None = None) -> dict[str, Any]:
        """The keyword arguments of runner.run_case for this run (``cases``: what runs, for
        its idle limit)."""
        o = self.options
        capability_file = str(o.capabilities_file) if o.capabilities_file is not None else None
        limit = self.idle_limit(cases or ())
        idle = limit if idle_timeout is None else min(idle_timeout, limit)
        return {"timeout": o.timeout if timeout is None else timeout, "manifest": self.manifest,
                "capability_document": self.capabilities, "idle_timeout": idle,
                "strict": o.strict, "capability_file": capability_file,
                "trace": o.trace_dir is not None, "twin": self.twin}

    # --- sessions ------------------------------------------------------------------------
    def _still_answers(self) -> bool:
        """False when the endpoint is unresponsive (module doc): ``unresponsive_after``
        operations in a row got no frame, and neither did one discovery operation on a fresh
        session (asked once: from then on every case fails at once)."""
        if len(self._silent) < self.options.unresponsive_after:
            return True
        if self._endpoint_silent:
            return False
        # each silent operation left its session unclean: that case reported it; whether the
        # endpoint answers at all is asked on a session no case has used
        self._fresh_needed = self._fresh_needed or \
            f"{len(self._silent)} operations in a row got no frame"
        if self._fresh_session() is not None:
            self._endpoint_silent = True
            return False
        before = self.client.frames_received
        wait = min(float(self.options.timeout), self.idle_limit())
        with contextlib.suppress(Exception):  # any frame answers it, an error terminal too
            self.portal.call(functools.partial(self.client.capabilities, timeout=wait))
        if self.client.frames_received > before:
            self._silent = []
            return True
        self._silent.append(f"{contract.OP_CAPABILITIES_GET} on a fresh session")
        self._endpoint_silent = True
        return False

    def _fresh_session(self) -> str | None:
        """Open a fresh session when the last case left the current one unclean; the reason
        every case fails with when none can be opened (None: a clean session is ready)."""
        client = self._client
        broken = getattr(client, "_broken", None) if client is not None else None
        why = self._fresh_needed or (f"the session dropped: {broken}" if broken else None)
        if why is None:
            return None
        self._fresh_needed = None
        self._left_open = []  # what the old session holds is no later case's cause
        old, self._client = self._client, None
        if old is not None:
            # bounded (NnrpClient.aclose); the endpoint sees the session close and may end
            # the operations it left open there (a session that cannot even close is gone)
            with contextlib.suppress(Exception):
                self.portal.call(old.aclose)
        try:
            self.connect()
        except Exception as exc:
            return f"cannot open a fresh session after {why}: {exc}"
        self.sessions_opened += 1
        return None

    def _after(self, result: Any, operations: list[Any],
               also_paced: list[Any] | None = None) -> None:
        """What ``result`` shows for the cases after it (module doc): ``operations`` ran on
        the run's session; ``also_paced`` (default ``operations``) feed the pace."""
        diag = result.diagnostics
        left = _never_ended(operations)
        broken = getattr(self._client, "_broken", None)
        if broken:
            diag["session_dropped"] = (f"{broken}: the next case runs on a fresh session "
                                       "(reported once, here)")
            self._fresh_needed = "the session dropped"
        elif left:
            diag["left_open"] = {
                "operations": len(left),
                "detail": "the endpoint never ended these operations on the session: the next "
                          "case runs on a fresh session (reported once, here)"}
            self._fresh_needed = f"{result.id} left {len(left)} operation(s) open"
        if left:
            self._left_open.append(result.id)
        for r in operations if also_paced is None else also_paced:
            self._pace.observe(r)
        shortened = self._pace.shortened(result.id)
        if shortened is not None:
            diag["idle_limit_shortened"] = shortened

    def _blame(self, results: list[Any]) -> None:
        """A refusal among ``results`` names the other cases that left operations open on
        the session it was refused on (module doc)."""
        for result in results:
            others = [c for c in self._left_open if c != result.id]
            if others and _refused(result):
                result.diagnostics["left_open_earlier"] = {
                    "cases": others,
                    "detail": "the endpoint refused this operation (an error before any "
                              "output that names a limit, an overload or scheduling) on a "
                              "session that holds operations these cases left open and it "
                              "never ended: the refusal may follow from them"}

    def idle_limit(self, cases: Any = ()) -> float:
        """The idle limit the next operation of ``cases`` gets (pace.py)."""
        return self._pace.limit(cases)

    # --- evidence across cases -----------------------------------------------------------
    def _note_refusals(self, result: Any) -> None:
        """Refusals no case owns since the last case: this case's evidence, judging nothing
        (``client.refused.unowned_since``, docs/verdicts.md#refused-after-terminal)."""
        # lazy on purpose: the client package loads nnrp-py's native library (see connect())
        from nnrp_conformance.client.refused import unowned_since

        owned = {f.get("operation_id") for f in result.diagnostics.get("wire_findings") or ()}
        others, self._refusals_shown_ns = unowned_since(
            getattr(self._client, "refused_frames", None) or (), self._refusals_shown_ns, owned)
        if others:
            result.diagnostics["refused_frames_not_this_case"] = others

    def _note_frames(self, before: int, during: str) -> None:
        """Count ``during`` as a silent operation, or remember the endpoint's last frame."""
        client = self._client
        if client is None:
            return
        if client.frames_received == before:
            self._silent.append(during)
            return
        self._silent = []
        kind, ns = client.last_frame or ("?", time.perf_counter_ns())
        wall = time.time() - (time.perf_counter_ns() - ns) / 1e9
        at = time.strftime("%H:%M:%S", time.gmtime(wall)) + f".{int(wall % 1 * 1000):03d}Z"
        self._last_seen = f"{kind} during {during} at {at}"

    def unresponsive_reason(self) -> str:
        """The run-level finding's text: which operations got nothing, and the last frame."""
        return (f"endpoint unresponsive: no frame at all during the last {len(self._silent)} "
                f"operations ({', '.join(self._silent)}); last frame seen: "
                f"{self._last_seen or 'none since the session opened'}")


def _refused(result: Any) -> bool:
    """An error before any output that says it is a refusal (``checks/refusals.py``),
    whatever its request asked for."""
    diag = result.diagnostics
    if result.terminal != contract.TERMINAL_ERROR or diag.get("event_count"):
        return False
    last = result.events[-1] if result.events else None
    return refusal_named(last if isinstance(last, dict) and last.get("type") in
                         contract.TERMINAL_EVENT_TYPES else None,
                         status_code=diag.get("status_code"), drop_reason=diag.get("drop_reason"))


def _never_ended(operations: list[Any]) -> list[Any]:
    """The operations the endpoint never ended (no terminal, and the session did not fail
    under them)."""
    return [r for r in operations if r.span_ns is not None and r.span_ns[1] is None
            and r.diagnostics.get("terminal_delivery") != "transport_error"]


def _other_session(client: Any, cases: list[Any], results: list[Any]) -> dict[str, Any]:
    """What a group's second session showed (``diagnostics.concurrency.other_session``): it
    dropped, or the endpoint left operations open on it. It is closed after the group, so no
    later case meets either; the group's case is the one that reports it."""
    broken = getattr(client, "_broken", None)
    ran = [r for c, r in zip(cases, results, strict=True) if c.session == SESSION_ANOTHER]
    left = _never_ended(ran)
    note: dict[str, Any] = {"operations": [c.name for c in cases
                                           if c.session == SESSION_ANOTHER]}
    if broken:
        note["session_dropped"] = str(broken)
    elif left:
        note["left_open"] = len(left)
    return note
