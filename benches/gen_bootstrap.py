#!/usr/bin/env python3
"""Write a synthetic bootstrap base directory for the benchmark harness (benches/run.sh).

The directory has the layout `machine-config-server bootstrap --server-basedir` reads:
kubeconfig, controller-config/ and api-server/ copied from a template directory (the realistic
fixture), plus, for every requested pool, machine-pools/<pool>.yaml and a rendered
MachineConfig machine-configs/rendered-<pool>-<hash>.yaml whose Ignition config carries about
--config-bytes of files and systemd units (text as percent-encoded `data:,` URLs, some binary as
base64, the way real rendered configs look). Content is pseudo-random from --seed, so runs are
repeatable and pools differ.

`spec.config` is written as one JSON flow mapping inside block YAML (valid YAML, and no PyYAML
needed); metadata stays block YAML so the harness can bump the release-image-version annotation
with the same `sed` expression it uses on the realistic fixture.

Standard library only.
"""

import argparse
import base64
import hashlib
import json
import uuid
import random
import shutil
import sys
import urllib.parse
from pathlib import Path

WORDS = (
    "kubelet crio node network bridge route address mtu vlan bond ovs ovn cluster etcd "
    "apiserver proxy registry mirror certificate authority token service socket timer mount "
    "path device volume container image runtime cgroup memory cpu limit reserve eviction "
    "threshold hard soft signal period interval timeout retry backoff enable disable true false"
).split()


def text_blob(rng: random.Random, size: int) -> str:
    """Config-file-like text of about `size` characters."""
    lines = []
    total = 0
    while total < size:
        kind = rng.random()
        if kind < 0.15:
            line = f"[{rng.choice(WORDS).capitalize()}]"
        elif kind < 0.25:
            line = "# " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))
        else:
            key = "_".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
            value = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
            if rng.random() < 0.3:
                value = f"/{rng.choice(WORDS)}/{rng.choice(WORDS)}/{rng.randint(0, 99999)}"
            line = f"{key}={value}"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def machine_config(name: str, pool: str, config_bytes: int, rng: random.Random) -> str:
    files = []
    units = []
    used = 0
    index = 0
    while used < config_bytes:
        index += 1
        size = rng.randint(512, 48 * 1024)
        choice = rng.random()
        if choice < 0.7:
            source = "data:," + urllib.parse.quote(text_blob(rng, size), safe="/=_-.~!*'()")
            files.append(
                {
                    "contents": {"source": source},
                    "mode": rng.choice([420, 384, 493]),
                    "overwrite": True,
                    "path": f"/etc/{pool}/generated/{index:05d}-{rng.choice(WORDS)}.conf",
                }
            )
            used += len(source)
        elif choice < 0.85:
            raw = rng.randbytes(size * 3 // 4)
            source = "data:;base64," + base64.b64encode(raw).decode()
            files.append(
                {
                    "contents": {"source": source},
                    "mode": 420,
                    "overwrite": True,
                    "path": f"/etc/pki/{pool}/{index:05d}-{rng.choice(WORDS)}.bin",
                }
            )
            used += len(source)
        else:
            contents = text_blob(rng, size // 4)
            units.append(
                {
                    "contents": contents,
                    "enabled": rng.random() < 0.8,
                    "name": f"{pool}-{index:05d}-{rng.choice(WORDS)}.service",
                }
            )
            used += len(contents)
    config = {
        "ignition": {"version": "3.5.0"},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-rsa SSH-AUTHORIZED-KEY"]}]},
        "storage": {"files": files},
        "systemd": {"units": units},
    }
    return f"""apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  annotations:
    machineconfiguration.openshift.io/generated-by-controller-version: synthetic-benchmark
    machineconfiguration.openshift.io/release-image-version: ""
  name: {name}
  ownerReferences:
  - apiVersion: machineconfiguration.openshift.io/v1
    blockOwnerDeletion: true
    controller: true
    kind: MachineConfigPool
    name: {pool}
    uid: {uuid.uuid5(uuid.NAMESPACE_URL, f"machineconfigpool/{pool}")}
spec:
  baseOSExtensionsContainerImage: ""
  config: {json.dumps(config, separators=(",", ":"))}
  extensions: []
  fips: false
  kernelArguments:
  - systemd.unified_cgroup_hierarchy=1
  kernelType: default
  osImageURL: ""
"""


def machine_config_pool(pool: str, rendered: str) -> str:
    return f"""apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: {pool}
spec:
  configuration:
    name: {rendered}
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: {pool}
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/{pool}: ""
  paused: false
status:
  configuration:
    name: {rendered}
  degradedMachineCount: 0
  machineCount: 0
  readyMachineCount: 0
  unavailableMachineCount: 0
  updatedMachineCount: 0
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="directory to create (must not exist)")
    parser.add_argument("--template", type=Path, required=True,
                        help="base directory to copy kubeconfig, controller-config/ and api-server/ from")
    parser.add_argument("--pools", default="master,arbiter", help="comma-separated pool names")
    parser.add_argument("--config-bytes", type=int, default=1_500_000,
                        help="approximate size of each MachineConfig's Ignition content")
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args()

    if args.out.exists():
        print(f"gen_bootstrap: {args.out} already exists", file=sys.stderr)
        return 1
    for needed in ("kubeconfig", "controller-config"):
        if not (args.template / needed).exists():
            print(f"gen_bootstrap: {args.template / needed} not found", file=sys.stderr)
            return 1
    (args.out / "machine-pools").mkdir(parents=True)
    (args.out / "machine-configs").mkdir()
    shutil.copyfile(args.template / "kubeconfig", args.out / "kubeconfig")
    for sub in ("controller-config", "api-server"):
        if (args.template / sub).is_dir():
            shutil.copytree(args.template / sub, args.out / sub, copy_function=shutil.copyfile)
            # The template may be read-only; the copy must be writable (the harness edits it).
            (args.out / sub).chmod(0o755)

    for number, pool in enumerate(p for p in args.pools.split(",") if p):
        rng = random.Random(args.seed * 1000 + number)
        digest = hashlib.md5(f"{args.seed}/{pool}".encode()).hexdigest()
        rendered = f"rendered-{pool}-{digest}"
        mc = machine_config(rendered, pool, args.config_bytes, rng)
        (args.out / "machine-configs" / f"{rendered}.yaml").write_text(mc)
        (args.out / "machine-pools" / f"{pool}.yaml").write_text(machine_config_pool(pool, rendered))
    return 0


if __name__ == "__main__":
    sys.exit(main())
