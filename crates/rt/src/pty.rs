//! A pseudo-terminal pair: a terminal for work that writes to one (a console) with nobody's
//! terminal involved. Both ends close when the [`Pty`] (or the end taken from it) drops.

use std::fs::File;
use std::os::fd::AsFd;

/// The two ends of a pseudo-terminal: what a program writes to `slave` (its terminal) is read
/// from `master` (the terminal emulator's side), after the line discipline (`\n` becomes `\r\n`).
pub struct Pty {
    pub master: File,
    pub slave: File,
}

impl Pty {
    /// A new pair with the default terminal settings and no window size.
    pub fn open() -> std::io::Result<Pty> {
        let p = nix::pty::openpty(None, None)?;
        Ok(Pty {
            master: File::from(p.master),
            slave: File::from(p.slave),
        })
    }
}

/// Whether `end` has something to read within `timeout_ms` (a reader that must notice a stop flag
/// waits in steps of this rather than in a read that may never return).
pub fn readable(end: &impl AsFd, timeout_ms: u16) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(end.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::from(timeout_ms)).is_ok_and(|n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn what_the_program_writes_the_terminal_reads() {
        let Pty {
            mut master,
            mut slave,
        } = Pty::open().unwrap();
        assert!(!readable(&master, 0), "a new terminal has nothing to read");
        slave.write_all(b"console line\n").unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        // The line discipline hands it over at once; 5 s is for a loaded machine.
        let t0 = std::time::Instant::now();
        while !got.ends_with(b"\r\n") && t0.elapsed().as_secs() < 5 {
            if readable(&master, 50) {
                let n = master.read(&mut buf).unwrap();
                got.extend_from_slice(&buf[..n]);
            }
        }
        assert_eq!(got, b"console line\r\n");
        assert!(!readable(&master, 0), "everything was read");
    }

    /// With the program's side closed, the terminal's side reads an error or end of file, never
    /// blocks: a reader thread ends.
    #[test]
    fn the_terminal_side_ends_when_the_program_side_closes() {
        let Pty { mut master, slave } = Pty::open().unwrap();
        drop(slave);
        assert!(readable(&master, 1000), "a hang-up is readable");
        let mut buf = [0u8; 16];
        assert!(matches!(master.read(&mut buf), Err(_) | Ok(0)));
    }
}
