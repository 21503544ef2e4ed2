//! Path traversal never serves a byte from outside the workload root, over h1, h2 and h3.
//! A secret sits right next to the root (and symlinks inside the root point at it), so any of
//! these requests would leak it if a protection were missing.

mod server_support;

use pagebench::embedded_server::client::ProbeConnection;
use pagebench::embedded_server::{Protocol, ServerKnobs};
use server_support::*;

const SECRET: &str = "TOP-SECRET-3f9a1c";

/// Request targets an attacker would try; all must end in 400 or 404.
const ATTACKS: &[&str] = &[
    "/../secret.txt",
    "/page10/../../secret.txt",
    "/%2e%2e/secret.txt",
    "/%2E%2E/secret.txt",
    "/.%2e/secret.txt",
    "/%2e%2e%2fsecret.txt",
    "/..%2fsecret.txt",
    "/..%5csecret.txt",
    "/..\\secret.txt",
    "/page10/%2e%2e/%2e%2e/secret.txt",
    "/page10/index.html%00/../../secret.txt",
    "/leak.txt",
    "/escape/secret.txt",
    "/page10/leak-deep.txt",
];

fn setup() -> (Pages, pagebench::embedded_server::EmbeddedServer) {
    let p = pages(&["page10"]);
    std::fs::write(p.dir.path().join("secret.txt"), SECRET).unwrap();
    std::os::unix::fs::symlink("../secret.txt", p.root.join("leak.txt")).unwrap();
    std::os::unix::fs::symlink("../../secret.txt", p.root.join("page10/leak-deep.txt")).unwrap();
    std::os::unix::fs::symlink("..", p.root.join("escape")).unwrap();
    let server = start(&p.root, ServerKnobs::default(), None);
    (p, server)
}

#[test]
fn traversal_over_h1_and_h2_is_refused() {
    let (_p, server) = setup();
    for flag in ["--http1.1", "--http2"] {
        // Control: a normal file is served by the same command line.
        let out = curl(
            &server,
            &[
                flag,
                "--path-as-is",
                "-w",
                "\n%{http_code}",
                &url(&server, "/page10/index.html"),
            ],
        );
        assert!(String::from_utf8_lossy(&out.stdout).ends_with("\n200"));
        for attack in ATTACKS {
            // --request-target puts the target on the wire exactly as written.
            let out = curl(
                &server,
                &[
                    flag,
                    "--path-as-is",
                    "--request-target",
                    attack,
                    "-w",
                    "\n%{http_code}",
                    &url(&server, "/"),
                ],
            );
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(!text.contains(SECRET), "{flag} {attack}: leaked the secret");
            let code = text.rsplit('\n').next().unwrap();
            assert!(
                code == "400" || code == "404",
                "{flag} {attack}: status {code}"
            );
        }
    }
    let log = server.requests_since(0);
    assert!(log.iter().filter(|r| r.status >= 400).count() >= 2 * ATTACKS.len());
}

#[test]
fn traversal_over_h3_is_refused() {
    let (_p, server) = setup();
    let cert = server.certificate().cert_der().clone();
    runtime().block_on(async {
        let mut c = ProbeConnection::connect(server.addr(), Protocol::H3, &cert)
            .await
            .unwrap();
        assert_eq!(c.get("/page10/index.html").await.unwrap().status, 200);
        for attack in ATTACKS.iter().filter(|a| !a.contains('\\')) {
            let f = c.get(attack).await.unwrap();
            assert!(
                !String::from_utf8_lossy(&f.body).contains(SECRET),
                "h3 {attack}: leaked the secret"
            );
            assert!(
                f.status == 400 || f.status == 404,
                "h3 {attack}: status {}",
                f.status
            );
        }
        c.close().await;
    });
}

#[test]
fn absolute_paths_stay_below_the_root() {
    let (p, server) = setup();
    let abs = p.dir.path().join("secret.txt");
    for target in [
        format!("/{}", abs.display()),
        "//etc/passwd".into(),
        "/etc/passwd".into(),
    ] {
        let out = curl(
            &server,
            &[
                "--http1.1",
                "--path-as-is",
                "--request-target",
                &target,
                "-w",
                "\n%{http_code}",
                &url(&server, "/"),
            ],
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains(SECRET) && !text.contains("root:"),
            "{target}: leaked"
        );
        assert!(text.ends_with("\n404"), "{target}: {text}");
    }
}
