#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Started by hand in a terminal, the server says what it is waiting for, and Ctrl-D ends it.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};

use test_support::bin::command;
use test_support::temp::temp_dir;

#[test]
fn a_person_at_a_terminal_is_told_what_the_server_is_waiting_for() {
    let root = temp_dir();
    let master: OwnedFd = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().expect("utf8 pty name"))
        .expect("open pty slave");
    let mut child = command()
        .arg("--root")
        .arg(root.path())
        .stdin(Stdio::from(slave))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = child.stderr.take().expect("stderr");
    let mut said = Vec::new();
    let mut buf = [0u8; 512];
    while !said.contains(&b'\n') {
        let n = stderr.read(&mut buf).expect("read stderr");
        assert!(n > 0, "stderr closed before the greeting");
        said.extend_from_slice(&buf[..n]);
    }
    let said = String::from_utf8_lossy(&said);
    assert!(said.contains("waiting for an MCP client"), "{said}");
    assert!(
        said.contains("12 tools") && said.contains("mode: filesystem"),
        "{said}"
    );

    // Ctrl-D at the start of a line is end of input for a terminal.
    let mut master = std::fs::File::from(master);
    master.write_all(b"\x04").expect("send EOF");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not exit on Ctrl-D"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
