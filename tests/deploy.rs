//! The deployment files under `deploy/` against the binary they deploy: every Kubernetes
//! manifest parses and the kustomization lists them all; the ConfigMap's `servery.toml`, run
//! through `check-config` with the container's own command line, is accepted, and its effective
//! deadlines and ports agree with the Deployment (grace period, probes, container ports), the
//! Services and the NetworkPolicy; every container is Guaranteed with whole CPUs, non-root and
//! read-only; the probe paths answer 200 on the real server started from that config; and the
//! systemd units are those docs/operations.md shows, with an ExecStart that `check-config`
//! accepts and a stop timeout past the force deadline.
//!
//! Nothing here listens beyond 127.0.0.1: `check-config` binds nothing, and the one server
//! started gets `--bind 127.0.0.1:0 --admin 127.0.0.1:0` (flags win over the file's
//! `0.0.0.0` addresses) and is stopped by SIGTERM, or killed by its drop.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{servery, Signal, TestServer};
use yaml_rust2::{Yaml, YamlLoader};

/// `deploy/` in this checkout.
const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy");
/// docs/operations.md, whose systemd section shows the units of `deploy/systemd`.
const OPERATIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md");
/// How long the supervisor waits, after the force deadline, for SIGKILLed workers to be reaped
/// before it reports them and exits (`REAP_GRACE` in src/supervisor/shutdown.rs).
const REAP_GRACE_S: f64 = 1.0;
/// What a grace period or a stop timeout must leave beyond the supervisor's own last moment.
const MARGIN_S: f64 = 5.0;
/// The key of the config file in the ConfigMap.
const CONFIG_KEY: &str = "servery.toml";

/// One YAML document of a manifest file.
struct Doc {
    file: String,
    yaml: Yaml,
}

/// Every document of every `.yaml` file in `deploy/kubernetes`, parsed.
fn manifests() -> Vec<Doc> {
    let mut docs = Vec::new();
    for file in yaml_files() {
        let path = Path::new(DEPLOY).join("kubernetes").join(&file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let parsed = YamlLoader::load_from_str(&text)
            .unwrap_or_else(|e| panic!("{file} is not valid YAML: {e}"));
        assert!(!parsed.is_empty(), "{file} holds no document");
        for yaml in parsed {
            docs.push(Doc {
                file: file.clone(),
                yaml,
            });
        }
    }
    docs
}

/// The names of the `.yaml` files in `deploy/kubernetes`, sorted.
fn yaml_files() -> Vec<String> {
    let dir = Path::new(DEPLOY).join("kubernetes");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").file_name())
        .filter_map(|n| n.into_string().ok())
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
        .collect();
    files.sort();
    files
}

/// The one object of `kind` named `name`.
fn object(docs: &[Doc], kind: &str, name: &str) -> Yaml {
    let found: Vec<&Doc> = docs
        .iter()
        .filter(|d| d.yaml["kind"].as_str() == Some(kind))
        .filter(|d| d.yaml["metadata"]["name"].as_str() == Some(name))
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind} named {name}");
    found[0].yaml.clone()
}

/// A string field, or a panic naming it.
fn text<'a>(y: &'a Yaml, what: &str) -> &'a str {
    y.as_str()
        .unwrap_or_else(|| panic!("{what} should be a string: {y:?}"))
}

/// A sequence field (absent reads as empty).
fn list(y: &Yaml) -> &[Yaml] {
    y.as_vec().map(Vec::as_slice).unwrap_or(&[])
}

/// The Deployment's pod spec.
fn pod(docs: &[Doc]) -> Yaml {
    object(docs, "Deployment", "servery")["spec"]["template"]["spec"].clone()
}

/// The `servery` container of the pod.
fn container(pod: &Yaml) -> Yaml {
    list(&pod["containers"])
        .iter()
        .find(|c| c["name"].as_str() == Some("servery"))
        .expect("a container named servery")
        .clone()
}

/// A port as a probe, a Service or a NetworkPolicy gives it: a number, or the name of one of
/// the container's ports.
fn resolve_port(port: &Yaml, container: &Yaml) -> u16 {
    match port {
        Yaml::Integer(n) => u16::try_from(*n).expect("a port number"),
        Yaml::String(name) => list(&container["ports"])
            .iter()
            .find(|p| p["name"].as_str() == Some(name))
            .and_then(|p| p["containerPort"].as_i64())
            .and_then(|n| u16::try_from(n).ok())
            .unwrap_or_else(|| panic!("no container port named {name}")),
        other => panic!("a port should be a number or a name: {other:?}"),
    }
}

/// The ConfigMap's config file, as written.
fn config_text(docs: &[Doc]) -> String {
    let cm = object(docs, "ConfigMap", "servery-config");
    text(&cm["data"][CONFIG_KEY], "the ConfigMap's servery.toml").to_owned()
}

/// The container's command line after `servery serve`, its `--config` value replaced by
/// `config`, run as `check-config ROOT ...`: the effective config it prints. `root` stands in
/// for the docroot, which exists only in the pod (the positional ROOT wins over the file's).
fn check_container_command(docs: &[Doc], config: &Path, root: &Path) -> toml::Table {
    let c = container(&pod(docs));
    let command: Vec<&str> = list(&c["command"])
        .iter()
        .chain(list(&c["args"]))
        .map(|a| text(a, "a command-line word"))
        .collect();
    assert!(
        command.first().is_some_and(|p| p.ends_with("/servery")),
        "{command:?}"
    );
    assert_eq!(command.get(1), Some(&"serve"), "{command:?}");
    let mut args = command[2..].to_vec();
    let at = args
        .iter()
        .position(|a| *a == "--config")
        .expect("the container passes --config");
    let config = config.to_str().expect("UTF-8 temp path");
    args[at + 1] = config;
    check_config(root, &args)
}

/// `servery check-config ROOT ARGS...`, expecting exit 0: the effective config, parsed.
fn check_config(root: &Path, args: &[&str]) -> toml::Table {
    let root = root.to_str().expect("UTF-8 temp path");
    let mut all = vec!["check-config", root];
    all.extend_from_slice(args);
    let out = servery(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "check-config {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .parse()
        .unwrap_or_else(|e| panic!("check-config printed invalid TOML ({e}):\n{stdout}"))
}

/// The ConfigMap's config written to a temp dir, which also serves as the stand-in docroot:
/// the dir, the file and its effective config.
fn effective_configmap(docs: &[Doc]) -> (tempfile::TempDir, PathBuf, toml::Table) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join(CONFIG_KEY);
    std::fs::write(&file, config_text(docs)).expect("write the config");
    let effective = check_container_command(docs, &file, dir.path());
    (dir, file, effective)
}

/// A duration in the effective config (`"30s"`), in seconds.
fn seconds(c: &toml::Table, key: &str) -> f64 {
    use serde::Deserialize;
    let value = c.get(key).cloned();
    value
        .and_then(|v| servery::config::Seconds::deserialize(v).ok())
        .unwrap_or_else(|| panic!("{key} should be a duration: {:?}", c.get(key)))
        .0
}

/// The port of an address in the effective config (`admin`, or the first `bind`).
fn port(addr: &toml::Value) -> u16 {
    let addr: SocketAddr = addr
        .as_str()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("an address: {addr:?}"));
    addr.port()
}

fn bind_port(c: &toml::Table) -> u16 {
    let binds = c["bind"].as_array().expect("bind is a list");
    assert_eq!(binds.len(), 1, "one plain listener: {binds:?}");
    port(&binds[0])
}

fn admin_port(c: &toml::Table) -> u16 {
    port(
        c.get("admin")
            .expect("the config sets admin: the probes need it"),
    )
}

/// The preStop hook's sleep in seconds: the sleep action, or an `exec` of `sleep N`; 0 without
/// a hook.
fn pre_stop_sleep(container: &Yaml) -> f64 {
    let hook = &container["lifecycle"]["preStop"];
    if hook.is_badvalue() {
        return 0.0;
    }
    if let Some(s) = hook["sleep"]["seconds"].as_i64() {
        return s as f64;
    }
    let exec: Vec<&str> = list(&hook["exec"]["command"])
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    match exec.as_slice() {
        [sleep, n] if sleep.ends_with("sleep") => n.parse().expect("sleep seconds"),
        _ => panic!("a preStop hook other than a sleep: {hook:?}"),
    }
}

/// A Kubernetes CPU quantity that is a whole number of CPUs ("4" or 4), or `None` ("500m",
/// "1.5").
fn whole_cpus(q: &Yaml) -> Option<i64> {
    match q {
        Yaml::Integer(n) => Some(*n),
        Yaml::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A fenced block of `doc` that follows the line `` `/etc/systemd/system/NAME`: ``.
fn unit_in_docs(doc: &str, name: &str) -> String {
    let marker = format!("`/etc/systemd/system/{name}`:\n\n```ini\n");
    let start = doc
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/operations.md shows no {name}"))
        + marker.len();
    let len = doc[start..].find("```\n").expect("the block closes");
    doc[start..start + len].to_owned()
}

fn unit_file(name: &str) -> String {
    let path = Path::new(DEPLOY).join("systemd").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The values of `key=` in a unit file, in order.
fn unit_values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    let prefix = format!("{key}=");
    unit.lines()
        .filter_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .collect()
}

#[test]
fn every_manifest_parses_and_the_kustomization_lists_them_all() {
    let docs = manifests();
    for d in &docs {
        let kind = text(&d.yaml["kind"], &format!("{}: kind", d.file));
        text(&d.yaml["apiVersion"], &format!("{}: apiVersion", d.file));
        if kind != "Kustomization" {
            text(
                &d.yaml["metadata"]["name"],
                &format!("{}: metadata.name", d.file),
            );
        }
    }
    let kustomization = docs
        .iter()
        .find(|d| d.yaml["kind"].as_str() == Some("Kustomization"))
        .expect("a kustomization.yaml");
    assert_eq!(kustomization.file, "kustomization.yaml");
    let listed: BTreeSet<String> = list(&kustomization.yaml["resources"])
        .iter()
        .map(|r| text(r, "a kustomization resource").to_owned())
        .collect();
    let files: BTreeSet<String> = yaml_files()
        .into_iter()
        .filter(|f| f != "kustomization.yaml")
        .collect();
    assert_eq!(listed, files, "kustomization.yaml lists every manifest");
    for kind in ["ConfigMap", "Deployment", "Service", "NetworkPolicy"] {
        assert!(
            docs.iter().any(|d| d.yaml["kind"].as_str() == Some(kind)),
            "no {kind}"
        );
    }
}

#[test]
fn the_configmap_passes_check_config_with_the_containers_command_line() {
    let docs = manifests();
    let (_dir, _file, effective) = effective_configmap(&docs);
    let pod = pod(&docs);
    let c = container(&pod);
    // The file the command names is the ConfigMap's key, where the pod mounts it.
    let command: Vec<&str> = list(&c["command"])
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    let at = command.iter().position(|a| *a == "--config").unwrap();
    let config_path = Path::new(command[at + 1]);
    assert_eq!(
        config_path.file_name().and_then(|n| n.to_str()),
        Some(CONFIG_KEY)
    );
    let mounts = list(&c["volumeMounts"]);
    let mount_of = |path: &Path| {
        mounts
            .iter()
            .find(|m| m["mountPath"].as_str().map(Path::new) == Some(path))
            .and_then(|m| m["name"].as_str())
            .unwrap_or_else(|| panic!("nothing is mounted at {}", path.display()))
            .to_owned()
    };
    let config_volume = mount_of(config_path.parent().unwrap());
    let volume = |name: &str| {
        list(&pod["volumes"])
            .iter()
            .find(|v| v["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("no volume {name}"))
            .clone()
    };
    assert_eq!(
        volume(&config_volume)["configMap"]["name"].as_str(),
        Some("servery-config")
    );
    // The file's root is the docroot volume, mounted read-only for servery.
    let written: toml::Table = config_text(&docs).parse().expect("the ConfigMap's TOML");
    let root = Path::new(written["root"].as_str().expect("the config sets root"));
    let docroot = mount_of(root);
    assert!(
        mounts
            .iter()
            .any(|m| m["name"].as_str() == Some(&docroot) && m["readOnly"].as_bool() == Some(true)),
        "the docroot is mounted read-only"
    );
    assert!(!volume(&docroot).is_badvalue());
    // Every key the file writes is a setting servery shows back.
    for key in written.keys().filter(|k| *k != "root") {
        assert!(
            effective.contains_key(key),
            "{key} is not in the effective config"
        );
    }
}

#[test]
fn the_grace_period_covers_the_prestop_sleep_and_the_force_deadline() {
    let docs = manifests();
    let (_dir, _file, effective) = effective_configmap(&docs);
    let drain = seconds(&effective, "drain_timeout");
    let force = seconds(&effective, "force_timeout");
    assert!(force > drain, "force {force} s after drain {drain} s");
    let written: toml::Table = config_text(&docs).parse().unwrap();
    if !written.contains_key("force_timeout") {
        // Left out, the force deadline follows the drain deadline by the default margin.
        let margin =
            servery::config::DEFAULT_FORCE_TIMEOUT_S - servery::config::DEFAULT_DRAIN_TIMEOUT_S;
        assert_eq!(force, drain + margin);
    }
    let pod = pod(&docs);
    let grace = pod["terminationGracePeriodSeconds"]
        .as_i64()
        .expect("terminationGracePeriodSeconds is set") as f64;
    let sleep = pre_stop_sleep(&container(&pod));
    assert!(
        sleep > 0.0,
        "a preStop sleep lets load balancers drop the pod"
    );
    let needed = sleep + force + REAP_GRACE_S + MARGIN_S;
    assert!(
        grace >= needed,
        "terminationGracePeriodSeconds {grace} < preStop {sleep} + force_timeout {force} \
         + reap {REAP_GRACE_S} + margin {MARGIN_S} = {needed}"
    );
}

#[test]
fn probes_and_services_use_the_configs_ports() {
    let docs = manifests();
    let (_dir, _file, effective) = effective_configmap(&docs);
    let (bind, admin) = (bind_port(&effective), admin_port(&effective));
    let c = container(&pod(&docs));
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"].as_str(), Some(path), "{probe}");
        assert_eq!(resolve_port(&get["port"], &c), admin, "{probe} port");
    }
    let ports: BTreeSet<u16> = list(&c["ports"])
        .iter()
        .map(|p| resolve_port(&p["containerPort"], &c))
        .collect();
    assert_eq!(ports, BTreeSet::from([bind, admin]), "container ports");
    // Unprivileged ports: the container drops every capability.
    assert!(bind >= 1024 && admin >= 1024, "bind {bind}, admin {admin}");

    let targets = |name: &str| -> Vec<u16> {
        let svc = object(&docs, "Service", name);
        list(&svc["spec"]["ports"])
            .iter()
            .map(|p| resolve_port(&p["targetPort"], &c))
            .collect()
    };
    assert_eq!(
        targets("servery"),
        [bind],
        "the HTTP Service carries the bind port only"
    );
    assert_eq!(targets("servery-metrics"), [admin]);

    let policy = object(&docs, "NetworkPolicy", "servery");
    let rules: Vec<(bool, Vec<u16>)> = list(&policy["spec"]["ingress"])
        .iter()
        .map(|r| {
            let ports = list(&r["ports"])
                .iter()
                .map(|p| resolve_port(&p["port"], &c))
                .collect();
            (r["from"].is_badvalue(), ports)
        })
        .collect();
    assert!(
        rules.contains(&(true, vec![bind])),
        "the HTTP port is open to every source: {rules:?}"
    );
    assert!(
        rules
            .iter()
            .all(|(open, ports)| !(*open && ports.contains(&admin))),
        "the admin port is not open to every source: {rules:?}"
    );
}

#[test]
fn every_container_is_guaranteed_with_whole_cpus() {
    let docs = manifests();
    let pod = pod(&docs);
    let containers: Vec<&Yaml> = list(&pod["initContainers"])
        .iter()
        .chain(list(&pod["containers"]))
        .collect();
    for c in containers {
        let name = text(&c["name"], "a container name");
        let (requests, limits) = (&c["resources"]["requests"], &c["resources"]["limits"]);
        for which in ["cpu", "memory"] {
            assert!(!limits[which].is_badvalue(), "{name}: no {which} limit");
            assert_eq!(
                requests[which], limits[which],
                "{name}: {which} requests != limits"
            );
        }
        assert_eq!(requests, limits, "{name}: requests != limits");
        let cpus = whole_cpus(&limits["cpu"])
            .unwrap_or_else(|| panic!("{name}: cpu {:?} is not whole CPUs", limits["cpu"]));
        assert!(cpus >= 1, "{name}: {cpus} CPUs");
    }
}

#[test]
fn every_container_runs_unprivileged_on_a_read_only_root() {
    let docs = manifests();
    let pod = pod(&docs);
    assert_eq!(pod["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
    let uid = pod["securityContext"]["runAsUser"].as_i64();
    assert!(
        uid.is_some_and(|u| u > 0),
        "a numeric non-root uid: {uid:?}"
    );
    assert_eq!(pod["automountServiceAccountToken"].as_bool(), Some(false));
    for c in list(&pod["initContainers"])
        .iter()
        .chain(list(&pod["containers"]))
    {
        let name = text(&c["name"], "a container name");
        let s = &c["securityContext"];
        assert_eq!(
            s["allowPrivilegeEscalation"].as_bool(),
            Some(false),
            "{name}"
        );
        assert_eq!(s["readOnlyRootFilesystem"].as_bool(), Some(true), "{name}");
        let drop: Vec<&str> = list(&s["capabilities"]["drop"])
            .iter()
            .filter_map(Yaml::as_str)
            .collect();
        assert_eq!(drop, ["ALL"], "{name}");
        assert!(
            s["capabilities"]["add"].is_badvalue(),
            "{name} adds capabilities"
        );
    }
}

#[test]
fn the_probe_paths_answer_on_a_server_started_from_the_configmap() {
    let docs = manifests();
    let (dir, file, effective) = effective_configmap(&docs);
    let c = container(&pod(&docs));
    std::fs::write(dir.path().join("index.html"), "origin\n").unwrap();
    // Loopback on port 0 and one unpinned worker instead of the pod's addresses and cores; the
    // rest (process isolation, the deadlines, the JSON access log) is the file's.
    let mut server = TestServer::builder()
        .root(dir.path())
        .admin()
        .args(&["--config", file.to_str().unwrap(), "--workers", "1"])
        .start();
    for probe in ["readinessProbe", "livenessProbe"] {
        let path = text(&c[probe]["httpGet"]["path"], "a probe path");
        let r = server.admin_get(path);
        assert_eq!(r.status, 200, "{probe} {path}: {r:?}");
    }
    assert_eq!(server.get("/").status, 200);
    // SIGTERM is what the kubelet sends after the preStop sleep: an idle server drains at once,
    // well within the force deadline the grace period is derived from.
    let force = Duration::from_secs_f64(seconds(&effective, "force_timeout"));
    server.signal(Signal::SIGTERM);
    let status = server
        .wait_exit(force)
        .expect("exited before the force deadline");
    assert!(status.success(), "{status:?}\n{}", server.stderr());
}

#[test]
fn the_systemd_units_are_the_ones_the_docs_show() {
    let doc = std::fs::read_to_string(OPERATIONS).expect("read docs/operations.md");
    for name in ["servery.socket", "servery.service"] {
        assert_eq!(
            unit_file(name),
            unit_in_docs(&doc, name),
            "deploy/systemd/{name} differs from docs/operations.md"
        );
    }
}

#[test]
fn the_systemd_service_passes_check_config_and_outlasts_the_force_deadline() {
    let service = unit_file("servery.service");
    let socket = unit_file("servery.socket");
    for required in unit_values(&service, "Requires") {
        assert!(
            Path::new(DEPLOY).join("systemd").join(required).exists(),
            "Requires={required} is not in deploy/systemd"
        );
    }
    let exec = unit_values(&service, "ExecStart");
    assert_eq!(exec.len(), 1, "{exec:?}");
    let words: Vec<&str> = exec[0].split_whitespace().collect();
    assert!(words[0].ends_with("/servery"), "{words:?}");
    assert_eq!(words[1], "serve", "{words:?}");
    // The unit's flags, with an empty stand-in for the operator's config file.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servery.toml");
    std::fs::write(&config, "").unwrap();
    let mut args = words[2..].to_vec();
    if let Some(at) = args.iter().position(|a| *a == "--config") {
        args[at + 1] = config.to_str().unwrap();
    }
    let effective = check_config(dir.path(), &args);
    let force = seconds(&effective, "force_timeout");
    let stop: f64 = unit_values(&service, "TimeoutStopSec")
        .first()
        .expect("TimeoutStopSec is set")
        .parse()
        .expect("TimeoutStopSec in seconds");
    assert!(
        stop >= force + REAP_GRACE_S + MARGIN_S,
        "TimeoutStopSec {stop} < force_timeout {force} + reap {REAP_GRACE_S} + margin {MARGIN_S}"
    );
    // The admin listener does not take a port the socket unit listens on.
    if effective.contains_key("admin") {
        let admin = admin_port(&effective);
        for listen in unit_values(&socket, "ListenStream") {
            let listened: SocketAddr = listen.parse().expect("ListenStream is IP:PORT");
            assert_ne!(listened.port(), admin, "ListenStream={listen}");
        }
    }
}
