"""The wardend pod of deploy/kubernetes/ as shipped, run on a Docker engine
(no kubelet runs here: docs/fleet.md): the DaemonSet's pod spec turned,
field by field, into what a kubelet asks of its container runtime, with
the ConfigMap's wardend.json as it is and the Secret's items from files
the caller makes (certificates, tokens).

Every field of the pod spec must be one this module knows how to run; a
field it does not know fails (PodSpecError), so that no part of the
shipped pod goes untried. What stands in for the cluster: a directory for
the PersistentVolumeClaim, the node's name and a pod uid for the downward
API, and the container's ports published on an address of the engine's
(a kubelet's probes reach the pod's own address).

Used by swarm_fleet_test.py (its image, on one of its engines).
"""
import json
import pathlib
import re
import shutil
import uuid

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
SECCOMP = ROOT / "deploy" / "seccomp"


class PodSpecError(AssertionError):
    pass


def documents():
    """Every document of deploy/kubernetes/, by kind and name."""
    found = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found[(doc["kind"], doc["metadata"]["name"])] = doc
    return found


def quantity(text):
    """A Kubernetes quantity (2, 500m, 64Mi, 8Gi) as a number: CPUs or bytes."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti)?", str(text))
    if not match:
        raise PodSpecError("quantity %r" % text)
    number, unit = float(match.group(1)), match.group(2)
    return number * {None: 1, "m": 1e-3, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}[unit]


def known(what, fields, allowed):
    unknown = sorted(set(fields) - set(allowed))
    if unknown:
        raise PodSpecError("%s: %s not emulated by tests/fleet/kubernetes_pod.py: teach it, so that the "
                           "shipped pod is tried whole" % (what, ", ".join(unknown)))


class Pod:
    """The DaemonSet `name`'s pod. `secrets` is a directory holding a file
    for each key of the Secret the pod mounts; `work` a directory for the
    files the pod's volumes need."""

    def __init__(self, secrets, work, node_name, publish_ip, name="wardend"):
        docs = documents()
        daemonset = docs[("DaemonSet", name)]
        self.namespace = daemonset["metadata"]["namespace"]
        self.docs = docs
        self.spec = daemonset["spec"]["template"]["spec"]
        self.secrets = pathlib.Path(secrets)
        self.work = pathlib.Path(work)
        self.node_name = node_name
        self.uid = str(uuid.uuid4())
        self.publish_ip = publish_ip
        known("pod spec", self.spec, {"automountServiceAccountToken", "enableServiceLinks",
                                      "terminationGracePeriodSeconds", "securityContext", "containers", "volumes"})
        if self.spec.get("automountServiceAccountToken", True) or self.spec.get("enableServiceLinks", True):
            raise PodSpecError("the pod would get a service account token or service links: not emulated")
        if len(self.spec["containers"]) != 1:
            raise PodSpecError("one container expected, not %d" % len(self.spec["containers"]))
        self.container = self.spec["containers"][0]
        self.image = self.container["image"]
        self.ports = {}     # port name -> container port
        self.probes = {}    # readinessProbe / livenessProbe -> (path, container port)

    # ---- the pieces of `docker run`

    def pod_security(self):
        context = self.spec.get("securityContext", {})
        known("pod securityContext", context, {"seccompProfile", "appArmorProfile"})
        args = []
        seccomp = context["seccompProfile"]
        known("seccompProfile", seccomp, {"type", "localhostProfile"})
        if seccomp["type"] != "Localhost":
            raise PodSpecError("seccompProfile %s not emulated" % seccomp["type"])
        # The kubelet reads <root>/seccomp/<localhostProfile>; docs/fleet.md
        # has deploy/seccomp/'s profile copied there.
        profile = SECCOMP / pathlib.PurePosixPath(seccomp["localhostProfile"]).name
        if not profile.is_file():
            raise PodSpecError("localhostProfile %s: no such profile in deploy/seccomp" % seccomp["localhostProfile"])
        args += ["--security-opt", "seccomp=%s" % profile]
        apparmor = context.get("appArmorProfile")
        if apparmor:
            known("appArmorProfile", apparmor, {"type"})
            if apparmor["type"] != "Unconfined":
                raise PodSpecError("appArmorProfile %s not emulated" % apparmor["type"])
            args += ["--security-opt", "apparmor=unconfined"]
        return args

    def environment(self):
        args = []
        for variable in self.container.get("env", []):
            known("env", variable, {"name", "value", "valueFrom"})
            if "value" in variable:
                value = variable["value"]
            else:
                field = variable["valueFrom"]["fieldRef"]["fieldPath"]
                values = {"spec.nodeName": self.node_name, "metadata.uid": self.uid,
                          "metadata.namespace": self.namespace}
                if field not in values:
                    raise PodSpecError("fieldRef %s not emulated" % field)
                value = values[field]
            args += ["--env", "%s=%s" % (variable["name"], value)]
        return args

    def container_security(self):
        context = self.container.get("securityContext", {})
        known("container securityContext", context, {"privileged", "runAsUser", "capabilities"})
        if context.get("privileged"):
            raise PodSpecError("a privileged container")
        args = ["--user", str(context.get("runAsUser", 0))]
        capabilities = context.get("capabilities", {})
        known("capabilities", capabilities, {"drop", "add"})
        for cap in capabilities.get("drop", []):
            args += ["--cap-drop", cap]
        for cap in capabilities.get("add", []):
            args += ["--cap-add", cap]
        return args

    def resources(self):
        resources = self.container.get("resources", {})
        known("resources", resources, {"requests", "limits"})
        requests, limits = resources.get("requests", {}), resources.get("limits", {})
        known("requests", requests, {"cpu", "memory"})
        known("limits", limits, {"cpu", "memory"})
        args = []
        # As the kubelet sets them: shares from the CPU request, a CFS
        # quota from a CPU limit, the memory limit as the cgroup's.
        if "cpu" in requests:
            args += ["--cpu-shares", str(max(2, int(quantity(requests["cpu"]) * 1024)))]
        if "cpu" in limits:
            args += ["--cpus", str(quantity(limits["cpu"]))]
        if "memory" in limits:
            args += ["--memory", str(int(quantity(limits["memory"])))]
        if "memory" in requests:
            args += ["--memory-reservation", str(int(quantity(requests["memory"])))]
        return args

    def network(self):
        args = []
        for port in self.container.get("ports", []):
            known("port", port, {"name", "containerPort", "protocol"})
            self.ports[port["name"]] = port["containerPort"]
            args += ["--publish", "%s::%d/%s" % (self.publish_ip, port["containerPort"], port["protocol"].lower())]
        for kind in ("readinessProbe", "livenessProbe"):
            probe = self.container.get(kind)
            if probe:
                known(kind, probe, {"httpGet", "periodSeconds", "failureThreshold"})
                known(kind + ".httpGet", probe["httpGet"], {"path", "port"})
                port = probe["httpGet"]["port"]
                self.probes[kind] = (probe["httpGet"]["path"], self.ports[port] if isinstance(port, str) else port)
        return args

    def volumes(self):
        """--mount for every volumeMount, from the files each volume holds."""
        sources = {}
        for volume in self.spec.get("volumes", []):
            name = volume["name"]
            known("volume " + name, volume, {"name", "configMap", "secret", "hostPath", "persistentVolumeClaim",
                                             "emptyDir"})
            if "configMap" in volume:
                data = self.docs[("ConfigMap", volume["configMap"]["name"])]["data"]
                d = self.work / "volumes" / name
                d.mkdir(parents=True)
                for key, text in data.items():
                    (d / key).write_text(text)
                sources[name] = ("bind", d)
            elif "secret" in volume:
                secret = volume["secret"]
                known("secret volume", secret, {"secretName", "defaultMode", "items"})
                keys = self.docs[("Secret", secret["secretName"])]["stringData"]
                d = self.work / "volumes" / name
                d.mkdir(parents=True)
                for item in secret.get("items", [{"key": k, "path": k} for k in keys]):
                    if item["key"] not in keys:
                        raise PodSpecError("secret item %s: the Secret has no such key" % item["key"])
                    shutil.copy(self.secrets / item["key"], d / item["path"])
                    (d / item["path"]).chmod(secret.get("defaultMode", 0o644))
                sources[name] = ("bind", d)
            elif "hostPath" in volume:
                path = pathlib.Path(volume["hostPath"]["path"])
                if volume["hostPath"].get("type") == "Directory" and not path.is_dir():
                    raise PodSpecError("hostPath %s is not a directory here" % path)
                sources[name] = ("bind", path)
            elif "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"]["claimName"]
                if ("PersistentVolumeClaim", claim) not in self.docs:
                    raise PodSpecError("claim %s is not in the manifests" % claim)
                d = self.work / "volumes" / name
                d.mkdir(parents=True)
                sources[name] = ("bind", d)
            else:
                empty = volume["emptyDir"]
                known("emptyDir", empty, {"medium", "sizeLimit"})
                if empty.get("medium") != "Memory":
                    raise PodSpecError("emptyDir on disk not emulated")
                sources[name] = ("tmpfs", int(quantity(empty["sizeLimit"])) if "sizeLimit" in empty else None)
        args = []
        for mount in self.container.get("volumeMounts", []):
            known("volumeMount", mount, {"name", "mountPath", "subPath", "readOnly"})
            kind, source = sources[mount["name"]]
            if kind == "tmpfs":
                spec = "type=tmpfs,destination=%s" % mount["mountPath"]
                if source:
                    spec += ",tmpfs-size=%d" % source
            else:
                if "subPath" in mount:
                    source = source / mount["subPath"]
                spec = "type=bind,source=%s,destination=%s" % (source, mount["mountPath"])
            if mount.get("readOnly"):
                spec += ",readonly"
            args += ["--mount", spec]
        return args

    def run_args(self, container_name):
        """`docker run` arguments for the pod's container, detached."""
        known("container", self.container, {"name", "image", "imagePullPolicy", "command", "env", "ports",
                                            "securityContext", "readinessProbe", "livenessProbe", "resources",
                                            "volumeMounts"})
        if self.container.get("imagePullPolicy") != "IfNotPresent":
            raise PodSpecError("imagePullPolicy %s: the engine has no registry" % self.container.get("imagePullPolicy"))
        command = self.container["command"]
        return (["run", "--detach", "--name", container_name,
                 "--stop-timeout", str(self.spec.get("terminationGracePeriodSeconds", 30))]
                + self.pod_security() + self.container_security() + self.environment() + self.resources()
                + self.network() + self.volumes()
                + ["--entrypoint", command[0], self.image] + command[1:])

    def configuration(self):
        """wardend.json as the ConfigMap ships it, parsed."""
        return json.loads(self.docs[("ConfigMap", "warden-config")]["data"]["wardend.json"])
