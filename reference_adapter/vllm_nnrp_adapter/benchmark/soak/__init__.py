"""The soak and load family: the adapter kept busy for long, or by many sessions at once.

Commands: ``bench soak`` (:mod:`.soak`, thousands of operations through the real handler and
server binding on a scripted backend: resident memory flat, every event checked; the release
run's ``soak`` and ``load`` documents) and ``bench capacity`` (:mod:`.capacity`, the most
concurrent streaming sessions served without an error, real vLLM). Pieces of the soak:
:mod:`.backend` (the scripted backend), :mod:`.mix` (the operation mix and its exact
expectations), :mod:`.memory` (RSS, malloc, object census), :mod:`.report` (verdict and
table), :mod:`.results` (the documents the release gate reads).
"""
