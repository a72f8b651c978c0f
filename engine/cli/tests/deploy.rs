//! deploy/: the Kubernetes manifests against the Kubernetes 1.30 schemas
//! (`tests/tools/k8s_check.py`, kubernetes-validate from PyPI, strict), a
//! broken copy refused, and the container image's runtime packages checked
//! against what the binary links: each `librte_*` library it needs comes
//! from a package the Containerfile installs, and apt resolves that list.
//! The image build itself is `scripts/container-check.sh` (minutes long).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// k8s_check.py on `dir`: exit status and output.
fn k8s_check(dir: &Path) -> (bool, String) {
    let o = Command::new("python3")
        .arg(root().join("tests/tools/k8s_check.py"))
        .arg(dir)
        .output()
        .expect("python3 runs");
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), text)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), t).unwrap();
        }
    }
}

#[test]
fn every_manifest_validates_and_a_broken_one_is_refused() {
    let manifests = root().join("deploy/kubernetes");
    let (ok, out) = k8s_check(&manifests);
    assert!(ok, "{out}");
    for want in [
        "base: DaemonSet/grorx",
        "overlays/smoke: DaemonSet/grorx",
        "pod.yaml: Pod/grorx-sink",
    ] {
        assert!(
            out.contains(&format!("ok   {want}")),
            "{want} not checked:\n{out}"
        );
    }
    // A field Kubernetes does not know, and a resource no network names.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&manifests, dir.path());
    let ds = dir.path().join("base/daemonset.yaml");
    let text = std::fs::read_to_string(&ds).unwrap();
    let broken = text
        .replace(
            "terminationGracePeriodSeconds",
            "terminationGracePeriodSecs",
        )
        .replace(
            "intel.com/intel_sriov_dpdk: \"2\"",
            "intel.com/other: \"2\"",
        );
    std::fs::write(&ds, broken).unwrap();
    let (ok, out) = k8s_check(dir.path());
    assert!(!ok, "{out}");
    assert!(
        out.contains("'terminationGracePeriodSecs' was unexpected"),
        "{out}"
    );
    assert!(out.contains("asks for intel.com/other"), "{out}");
}

/// The Debian packages the Containerfile's runtime stage installs.
fn runtime_packages() -> Vec<String> {
    let cf = std::fs::read_to_string(root().join("deploy/Containerfile")).unwrap();
    let runtime = &cf[cf.rfind("FROM ${BASE}").expect("a runtime stage")..];
    let mut words: Vec<String> = Vec::new();
    let mut joined = runtime.replace("\\\n", " ");
    joined = joined.replace('"', " ");
    for line in joined.lines() {
        let l = line.trim();
        if l.starts_with("ARG PMDS=") || l.contains("apt-get install") {
            words.extend(
                l.split_whitespace()
                    .filter(|w| w.starts_with("librte-"))
                    .map(String::from),
            );
        }
    }
    words
}

#[test]
fn the_image_installs_every_dpdk_library_the_binary_links() {
    let pkgs = runtime_packages();
    assert!(pkgs.len() > 20, "{pkgs:?}");
    let ldd = Command::new("ldd")
        .arg(env!("CARGO_BIN_EXE_grorx"))
        .output()
        .expect("ldd runs");
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    let mut needed = 0;
    for line in ldd.lines().filter(|l| l.contains("librte_")) {
        let path = line
            .split("=>")
            .nth(1)
            .and_then(|r| r.split_whitespace().next());
        let Some(path) = path else { continue };
        let real = std::fs::canonicalize(path).unwrap();
        let owner = Command::new("dpkg").arg("-S").arg(&real).output().unwrap();
        let owner = String::from_utf8_lossy(&owner.stdout);
        let pkg = owner.split(':').next().unwrap_or("").trim().to_string();
        assert!(
            pkgs.contains(&pkg),
            "{} comes from {pkg}, which the image does not install",
            real.display()
        );
        needed += 1;
    }
    assert!(needed > 5, "ldd found {needed} DPDK libraries:\n{ldd}");
    // apt knows every package named (a simulated install resolves them).
    let o = Command::new("apt-get")
        .args(["install", "-s", "--no-install-recommends"])
        .args(&pkgs)
        .output()
        .expect("apt-get runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
