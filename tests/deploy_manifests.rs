//! deploy/: the Kubernetes manifests validate offline against the Kubernetes schema
//! (kubernetes-validate from PyPI, which ships the schemas; setup.sh installs it into
//! target/k8s-venv), and hold what the schema cannot check: an Indexed Job whose index becomes
//! `--shard`, per-index retries that resume, one pagebench pod per node, Guaranteed QoS, the
//! capabilities and the TUN device. The container image builds and runs where podman can
//! (an ignored, long test).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn venv_bin(name: &str) -> Option<PathBuf> {
    let p = root().join("target/k8s-venv/bin").join(name);
    p.exists().then_some(p)
}

fn manifests() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("deploy/kubernetes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

/// Validates `files` against Kubernetes `version`'s schema, strictly (unknown fields refused).
fn validate(tool: &Path, version: &str, files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(tool)
        .args(["--strict", "--kubernetes-version", version])
        .args(files)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The manifests as JSON (PyYAML comes with kubernetes-validate).
fn load(python: &Path, file: &Path) -> serde_json::Value {
    let out = Command::new(python)
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn kubernetes_manifests_validate_offline_and_hold_what_a_shard_needs() {
    let (Some(tool), Some(python)) = (venv_bin("kubernetes-validate"), venv_bin("python3")) else {
        eprintln!(
            "SKIPPED: target/k8s-venv/bin/kubernetes-validate is missing: run ./setup.sh (it installs kubernetes-validate from PyPI into that venv)"
        );
        return;
    };
    let files = manifests();
    assert_eq!(files.len(), 3, "{files:?}");
    // backoffLimitPerIndex is GA from 1.33; the package's newest schema too.
    for version in ["1.33.0", "1.37.0"] {
        let (ok, out) = validate(&tool, version, &files);
        assert!(ok, "Kubernetes {version}: {out}");
    }
    // The validator refuses what it should: a misspelt field, a wrong type.
    let tmp = tempfile::tempdir().unwrap();
    let job = std::fs::read_to_string(root().join("deploy/kubernetes/shards-job.yaml")).unwrap();
    for (what, broken) in [
        (
            "misspelt field",
            job.replace("backoffLimitPerIndex:", "backoffLimitPerIndx:"),
        ),
        (
            "wrong type",
            job.replace("completions: 3", "completions: three"),
        ),
    ] {
        assert_ne!(broken, job);
        let f = tmp.path().join("broken.yaml");
        std::fs::write(&f, broken).unwrap();
        let (ok, out) = validate(&tool, "1.33.0", &[f]);
        assert!(!ok, "a {what} passed: {out}");
    }

    let job = load(&python, &root().join("deploy/kubernetes/shards-job.yaml"));
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"], spec["parallelism"]);
    assert!(spec["backoffLimitPerIndex"].as_u64().unwrap() >= 1);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never", "per-index retries need it");
    let anti =
        &pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(anti["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        anti["labelSelector"]["matchLabels"],
        spec["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
            .as_str()
            .map(|n| serde_json::json!({ "app.kubernetes.io/name": n }))
            .unwrap(),
        "the anti-affinity selects the shard pods themselves"
    );
    let c = &pod["containers"][0];
    // Guaranteed QoS: requests = limits, CPU and memory.
    assert_eq!(c["resources"]["requests"], c["resources"]["limits"]);
    for r in ["cpu", "memory"] {
        assert!(c["resources"]["limits"][r].is_string(), "{r} limit");
    }
    let caps: Vec<&str> = c["securityContext"]["capabilities"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for cap in ["NET_ADMIN", "SYS_ADMIN"] {
        assert!(caps.contains(&cap), "{cap}: {caps:?}");
    }
    let tun = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["hostPath"]["path"] == "/dev/net/tun")
        .expect("a /dev/net/tun volume");
    assert_eq!(tun["hostPath"]["type"], "CharDevice");
    assert!(c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["mountPath"] == "/dev/net/tun"));
    // The index becomes --shard K/N, and a retried index resumes its directory.
    let script = c["args"][0].as_str().unwrap();
    assert!(script.contains("JOB_COMPLETION_INDEX + 1"), "{script}");
    assert!(script.contains("--shard \"$k/$SHARDS\""), "{script}");
    assert!(script.contains("--resume \"$dir\""), "{script}");
    let env = |name: &str| {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(
        env("SHARDS").unwrap().as_str().unwrap(),
        spec["completions"].to_string(),
        "SHARDS = completions"
    );
    // The merge Job reads the same volume and the same matrix.
    let merge = load(&python, &root().join("deploy/kubernetes/merge-job.yaml"));
    let m = &merge["spec"]["template"]["spec"];
    assert!(m["containers"][0]["args"][0]
        .as_str()
        .unwrap()
        .contains("pagebench merge"));
    assert_eq!(
        m["volumes"][0]["persistentVolumeClaim"]["claimName"],
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"]
    );
}

/// Builds deploy/Containerfile's image with podman (the `prebuilt` stage: the release binary of
/// this checkout; the base image comes from Debian's packages through debootstrap, as no
/// container registry is reachable here) and runs `pagebench --version` in it. Long (minutes):
/// `cargo build --release && cargo nextest run --run-ignored only container_image`.
#[test]
#[ignore]
fn the_container_image_builds_and_runs() {
    for tool in ["podman", "debootstrap", "runc"] {
        assert!(
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .status()
                .unwrap()
                .success(),
            "{tool} is missing: apt-get install podman debootstrap runc"
        );
    }
    let binary = root().join("target/release/pagebench");
    assert!(binary.exists(), "build it first: cargo build --release");
    let run = |args: &[&str]| {
        let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let base = "localhost/pagebench-debian:12";
    let have_base = Command::new("podman")
        .args(["image", "exists", base])
        .status()
        .unwrap()
        .success();
    if !have_base {
        let tmp = tempfile::tempdir().unwrap();
        let rootfs = tmp.path().join("rootfs");
        let rootfs = rootfs.to_str().unwrap();
        run(&["debootstrap", "--variant=minbase", "bookworm", rootfs]);
        let tar = tmp.path().join("rootfs.tar");
        run(&["tar", "-C", rootfs, "-cf", tar.to_str().unwrap(), "."]);
        run(&["podman", "import", tar.to_str().unwrap(), base]);
    }
    let root = root().to_str().unwrap();
    run(&[
        "podman",
        "build",
        // apt inside the build reaches Debian's mirrors as the host does (no bridge network).
        "--network",
        "host",
        // RUN steps in a chroot: no OCI runtime, which needs a pure cgroup v2 or v1 host.
        "--isolation",
        "chroot",
        "--target",
        "prebuilt",
        "--build-arg",
        &format!("DEBIAN_IMAGE={base}"),
        "-f",
        &format!("{root}/deploy/Containerfile"),
        "--ignorefile",
        &format!("{root}/deploy/containerignore"),
        "-t",
        "localhost/pagebench:test",
        root,
    ]);
    // This VM mounts cgroups in hybrid mode, which crun refuses and runc takes; and its hard
    // limits are below podman's default ones.
    let mut args = vec!["podman", "run", "--rm", "--network", "none"];
    if Command::new("sh")
        .args(["-c", "command -v runc"])
        .status()
        .unwrap()
        .success()
    {
        args.extend(["--runtime", "runc"]);
    }
    args.extend([
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
        "localhost/pagebench:test",
        "--version",
    ]);
    let version = run(&args);
    assert!(
        version.contains(&format!("pagebench {}", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
}
