//! Page-fault churn: map anonymous memory, write one byte per page (each write faults a page in),
//! unmap (which frees the pages and shoots down TLB entries), again.

use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes mapped per round.
pub const REGION: usize = 32 << 20;

pub fn run(stop: &AtomicBool) -> std::io::Result<u64> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let mut faulted = 0u64;
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: a fresh private anonymous mapping, written only inside its bounds, then unmapped.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                REGION,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error());
            }
            let base = p.cast::<u8>();
            let mut off = 0;
            while off < REGION {
                std::ptr::write_volatile(base.add(off), 1);
                off += page;
                faulted += 1;
                if off % (1 << 20) == 0 && stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            libc::munmap(p, REGION);
        }
    }
    Ok(faulted)
}
