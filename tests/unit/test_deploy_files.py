"""deploy/: the container build file and the Kubernetes example agree with each other, with the
adapter's command line and with the Kubernetes API, without a container engine or a cluster.

- Every Kubernetes document is validated (strict: unknown fields fail) against the API's own
  schemas with ``kubernetes-validate`` (bundled OpenAPI schemas, offline), and the kustomization
  renders with ``kubectl kustomize`` where kubectl is installed (it needs no cluster).
- The NNRP port is one number and one transport everywhere: the Containerfile's EXPOSE and
  entrypoint listen address, the HEALTHCHECK's probe, the container port named ``nnrp``, the
  Service's target and every probe's address.
- The container serves as the adapter's safe default demands of an address other hosts reach
  (TLS and an API key, issue 44): a TLS scheme, vLLM's ``--ssl-*`` files from the mounted TLS
  Secret, ``VLLM_API_KEY`` from a Secret, and probes that trust the mounted CA.
- The commands are real: ``serve`` and ``probe`` are entries of ``vllm-nnrp``'s command table
  and their arguments parse with the commands' own parsers; every probe's timeout outlasts
  the probe's own bound.
- The vLLM version the image is built on is the adapter's current tested line.
- Every file under deploy/ is one this test knows.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from nnrp_conformance.wire.pump import Endpoint, parse_address
from vllm_nnrp_adapter import NEWEST_TESTED
from vllm_nnrp_adapter.cli import COMMANDS, _serve_parser
from vllm_nnrp_adapter.launch import probe as probe_module
from vllm_nnrp_adapter.launch.security import from_vllm_argv, serving_problem

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CONTAINERFILE = DEPLOY / "Containerfile"
KUBE = DEPLOY / "kubernetes"
MANIFESTS = ("models-pvc.yaml", "deployment.yaml", "service.yaml")
KNOWN_FILES = {
    "Containerfile",
    *(f"kubernetes/{m}" for m in MANIFESTS),
    "kubernetes/kustomization.yaml",
}
KINDS = {
    "Deployment": "apps/v1",
    "Service": "v1",
    "PersistentVolumeClaim": "v1",
}
#: where the TLS Secret is mounted (the certificate, its key and the CA)
TLS_MOUNT = "/tls"
#: the oldest Kubernetes the example is checked against, and the newest the validator knows
KUBE_VERSIONS = ("1.28", kubernetes_validate.latest_version())


# --- reading the files -----------------------------------------------------------------------


@cache
def instructions() -> list[tuple[str, str]]:
    """The Containerfile as (INSTRUCTION, arguments): comments dropped, continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in CONTAINERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "the Containerfile ends inside a continued line"
    return out


def instruction(name: str) -> list[str]:
    return [args for word, args in instructions() if word == name]


def exec_form(args: str) -> list[str]:
    """A JSON-array (exec form) instruction argument."""
    parsed = yaml.safe_load(args)
    assert isinstance(parsed, list) and all(isinstance(a, str) for a in parsed), args
    return parsed


def arg_defaults() -> dict[str, str]:
    out = {}
    for args in instruction("ARG"):
        name, eq, default = args.partition("=")
        if eq:
            out[name] = default
    return out


@cache
def documents() -> dict[str, list[dict[str, Any]]]:
    """file name -> its YAML documents (every file under deploy/kubernetes/)."""
    out = {}
    for path in sorted(KUBE.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
        assert docs, f"{path.name} holds no document"
        out[path.name] = docs
    return out


def the(kind: str) -> dict[str, Any]:
    found = [d for docs in documents().values() for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def container() -> dict[str, Any]:
    containers = the("Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, "the example runs one container"
    return containers[0]



def entrypoint() -> list[str]:
    (args,) = instruction("ENTRYPOINT")
    return exec_form(args)


def listen_endpoint() -> Endpoint:
    """Where `vllm-nnrp serve` listens in the image, read with serve's own parser."""
    command = entrypoint()
    assert command[:2] == ["vllm-nnrp", "serve"], command
    assert "serve" in COMMANDS
    opts, rest = _serve_parser().parse_known_args(command[2:])
    assert rest == [], f"the entrypoint passes {rest} to vLLM: the model belongs to run time"
    endpoint = parse_address(opts.listen)
    assert endpoint.host == "0.0.0.0", "inside a container the adapter listens on all"
    assert endpoint.secure, "reachable from other hosts: TLS (the safe default)"
    return endpoint


def listen_port() -> int:
    port = listen_endpoint().port
    assert port is not None
    return port


def ip_protocol() -> str:
    """QUIC runs on UDP, the other carriers on TCP."""
    return "UDP" if listen_endpoint().transport == "quic" else "TCP"


def healthcheck_command() -> tuple[dict[str, str], list[str]]:
    (args,) = instruction("HEALTHCHECK")
    options, _, command = args.partition(" CMD ")
    flags = dict(f.removeprefix("--").split("=", 1) for f in shlex.split(options))
    return flags, exec_form(command)


def seconds(value: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", value)
    assert m, value
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def check_probe_command(command: list[str], port: int, outer_timeout_s: float) -> None:
    """`vllm-nnrp probe 127.0.0.1:PORT [--timeout S]`: a real command whose own bound ends
    before the supervisor's timeout (else a slow answer reads as a killed probe)."""
    assert command[:2] == ["vllm-nnrp", "probe"], command
    assert COMMANDS["probe"][0] is probe_module.command
    args = probe_module._parser().parse_args(command[2:])
    assert args.address == f"{listen_endpoint().scheme}://127.0.0.1:{port}", args.address
    # the probe trusts the CA of the mounted TLS Secret and checks the Service's name
    assert args.tls_ca is not None and str(args.tls_ca).startswith(TLS_MOUNT + "/")
    assert args.tls_server_name == the("Service")["metadata"]["name"]
    bound = args.timeout + probe_module._VERDICT_GRACE_S
    assert bound < outer_timeout_s, (
        f"the probe may take {bound:g}s, its supervisor gives it {outer_timeout_s:g}s"
    )


# --- the Kubernetes documents ------------------------------------------------------------------


def test_every_file_under_deploy_is_known() -> None:
    found = {p.relative_to(DEPLOY).as_posix() for p in DEPLOY.rglob("*") if p.is_file()}
    assert found == KNOWN_FILES


def test_each_document_has_its_kind_and_api_version() -> None:
    seen = []
    for name, docs in documents().items():
        for doc in docs:
            kind = doc.get("kind")
            if name == "kustomization.yaml":
                assert (kind, doc.get("apiVersion")) == (
                    "Kustomization",
                    "kustomize.config.k8s.io/v1beta1",
                )
                continue
            assert kind in KINDS, f"{name}: unexpected kind {kind!r}"
            assert doc.get("apiVersion") == KINDS[kind], f"{name}: {kind} {doc.get('apiVersion')}"
            assert doc["metadata"]["name"], f"{name}: {kind} without a name"
            seen.append(kind)
    assert sorted(seen) == sorted(KINDS)


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_the_manifests_are_valid_kubernetes_objects(version: str) -> None:
    for name in MANIFESTS:
        for doc in documents()[name]:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                path = "/".join(str(p) for p in exc.path)
                pytest.fail(
                    f"{name} ({doc['kind']}) against Kubernetes {version}: {path}: {exc.message}"
                )


def test_the_validator_refuses_a_broken_manifest() -> None:
    """The check above has teeth: a misspelled field and a port given as text both fail."""
    deployment = yaml.safe_load((KUBE / "deployment.yaml").read_text(encoding="utf-8"))
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBE_VERSIONS[0], strict=True)
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "nnrp"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBE_VERSIONS[0], strict=True)


def test_the_kustomization_lists_every_manifest() -> None:
    (kustomization,) = documents()["kustomization.yaml"]
    assert sorted(kustomization["resources"]) == sorted(MANIFESTS)
    assert set(documents()) == {*MANIFESTS, "kustomization.yaml"}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_kustomization_renders_offline() -> None:
    done = subprocess.run(
        ["kubectl", "kustomize", str(KUBE)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    rendered = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert sorted(d["kind"] for d in rendered) == sorted(KINDS)
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"vllm-nnrp:{NEWEST_TESTED}-cpu"


def test_selectors_reach_the_pods_and_the_volume_exists() -> None:
    deployment, service, claim = the("Deployment"), the("Service"), the("PersistentVolumeClaim")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    for selector in (deployment["spec"]["selector"]["matchLabels"], service["spec"]["selector"]):
        assert selector.items() <= labels.items(), selector
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["models"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]


# --- one port, real commands -------------------------------------------------------------------


def test_the_nnrp_port_is_one_number_everywhere() -> None:
    port = listen_port()
    (exposed,) = instruction("EXPOSE")
    assert exposed == f"{port}/{ip_protocol().lower()}"
    ports = {p["name"]: p for p in container()["ports"]}
    assert ports["nnrp"]["containerPort"] == port
    assert ports["nnrp"].get("protocol", "TCP") == ip_protocol()
    (service_port,) = the("Service")["spec"]["ports"]
    assert service_port["name"] == "nnrp" and service_port.get("protocol", "TCP") == ip_protocol()
    target = service_port["targetPort"]
    assert target == "nnrp" or target == port, target
    assert service_port["port"] == port
    assert "command" not in container(), "the image's entrypoint carries the listen address"


def test_every_probe_is_the_adapters_own_probe_command() -> None:
    port = listen_port()
    c = container()
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = c[kind]
        check_probe_command(probe["exec"]["command"], port, probe["timeoutSeconds"])
    # model loading takes minutes: the start-up probe allows at least ten of them
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600


def test_the_healthcheck_is_the_probe_command() -> None:
    flags, command = healthcheck_command()
    check_probe_command(command, listen_port(), seconds(flags["timeout"]))
    assert seconds(flags["start-period"]) >= 600


def test_the_container_args_name_a_model_on_the_models_volume() -> None:
    args = container()["args"]
    assert all(isinstance(a, str) for a in args), "every arg a string (numbers quoted)"
    _opts, vllm_args = _serve_parser().parse_known_args([*entrypoint()[2:], *args])
    assert not any(a.startswith("--nnrp-") for a in vllm_args)
    # cmd_serve's rule: a leading positional is the model (vLLM's `vllm serve MODEL`)
    assert vllm_args and not vllm_args[0].startswith("-"), "the model comes first"
    model = vllm_args[0]
    mounts = {m["name"]: m for m in container()["volumeMounts"]}
    assert mounts["models"]["readOnly"] is True
    assert model.startswith(mounts["models"]["mountPath"] + "/"), model


def test_the_pod_serves_with_tls_and_a_key_from_secrets() -> None:
    """What the safe default asks of the container, from Secrets the example does not hold."""
    args = container()["args"]
    _opts, vllm_args = _serve_parser().parse_known_args([*entrypoint()[2:], *args])
    security = from_vllm_argv(vllm_args, {"VLLM_API_KEY": "from-the-secret"})
    assert security.tls is not None
    mounts = {m["name"]: m for m in container()["volumeMounts"]}
    assert mounts["tls"]["mountPath"] == TLS_MOUNT and mounts["tls"]["readOnly"] is True
    assert {str(security.tls.certfile), str(security.tls.keyfile)} == {
        f"{TLS_MOUNT}/tls.crt", f"{TLS_MOUNT}/tls.key"}
    volumes = {v["name"]: v for v in the("Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"]
    env = {e["name"]: e for e in container()["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["name"]
    assert serving_problem([f"{listen_endpoint().scheme}://0.0.0.0:{listen_port()}"],
                           security, allow_insecure=False) is None


def test_the_pod_runs_as_the_images_user() -> None:
    (user,) = instruction("USER")
    pod_security = the("Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert pod_security["runAsNonRoot"] is True
    assert str(pod_security["runAsUser"]) == user


# --- the Containerfile ---------------------------------------------------------------------------


def test_the_image_is_built_on_the_newest_tested_vllm_line() -> None:
    defaults = arg_defaults()
    assert defaults["VLLM_VERSION"] == NEWEST_TESTED
    assert defaults["VLLM_IMAGE"] == "vllm/vllm-openai-cpu:v${VLLM_VERSION}-x86_64"
    (base,) = instruction("FROM")
    assert base == "${VLLM_IMAGE}"
    # every version written in deploy/ (GPU base, image tags, comments) is the same line
    versions = set()
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            versions |= set(re.findall(r"vllm/vllm-openai(?:-cpu)?:v(\d+\.\d+\.\d+)", text))
            versions |= set(re.findall(r"vllm-nnrp:(\d+\.\d+\.\d+)-(?:cpu|cuda)", text))
            versions |= set(re.findall(r"newTag: (\d+\.\d+\.\d+)-cpu", text))
    assert versions == {NEWEST_TESTED}


def test_the_image_copies_what_the_wheel_is_built_from() -> None:
    """``pip install`` of the copied tree builds the same wheel as a checkout: every package and
    force-included path of pyproject.toml, and its readme, are copied."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    needed = {
        *wheel["packages"],
        *wheel["force-include"],
        "pyproject.toml",
        project["project"]["readme"],
    }
    copied = set()
    for args in instruction("COPY"):
        *sources, _dest = shlex.split(args)
        copied |= {s for s in sources if not s.startswith("--")}
    missing = [
        n for n in sorted(needed) if not any(n == c or n.startswith(c + "/") for c in copied)
    ]
    assert missing == []
    # without the vllm extra: the base image's vLLM and torch stay as vLLM built them
    (install, *_) = [r for r in instruction("RUN") if "pip install" in r]
    assert "[vllm]" not in install and "nnrp-conformance" in install
