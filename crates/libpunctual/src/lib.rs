//! The C ABI of SPEC section 4 (`libpunctual.so`, `include/punctual.h`) over
//! [`punctual_periodic::Periodic`]. No panic crosses the boundary: each entry point catches it and
//! returns an error.

use punctual_periodic::{Periodic, PeriodicError};
use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The header, for `punctual install-lib`.
pub const HEADER: &str = include_str!("../include/punctual.h");

/// Opaque handle (`punctual_periodic` in C).
pub struct PunctualPeriodic {
    inner: Periodic,
    name: String,
}

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

fn boxed(r: std::thread::Result<Result<PunctualPeriodic, PeriodicError>>) -> *mut PunctualPeriodic {
    match r {
        Ok(Ok(p)) => Box::into_raw(Box::new(p)),
        Ok(Err(e)) => {
            set_errno(e.errno());
            std::ptr::null_mut()
        }
        Err(_) => {
            set_errno(libc::EIO);
            std::ptr::null_mut()
        }
    }
}

/// # Safety
/// None beyond the C contract: returns NULL with errno set on error.
#[no_mangle]
pub extern "C" fn punctual_periodic_new(
    period_ns: u64,
    phase_ns: u64,
    flags: u32,
) -> *mut PunctualPeriodic {
    boxed(catch_unwind(|| {
        Periodic::new(period_ns, phase_ns, flags).map(|inner| PunctualPeriodic {
            inner,
            name: "periodic".into(),
        })
    }))
}

/// # Safety
/// `channel` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn punctual_periodic_attach(
    channel: *const c_char,
    flags: u32,
) -> *mut PunctualPeriodic {
    if channel.is_null() {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let Ok(name) = (unsafe { CStr::from_ptr(channel) })
        .to_str()
        .map(str::to_string)
    else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    boxed(catch_unwind(|| {
        Periodic::attach(&name, flags).map(|inner| PunctualPeriodic {
            inner,
            name: name.clone(),
        })
    }))
}

/// # Safety
/// `p` must come from `punctual_periodic_new`/`_attach` (or be NULL); the out-pointers must be NULL
/// or valid.
#[no_mangle]
pub unsafe extern "C" fn punctual_wait_next_period(
    p: *mut PunctualPeriodic,
    lateness_ns: *mut i64,
    missed: *mut u64,
) -> c_int {
    // SAFETY: the caller passes a handle from this library or NULL.
    let Some(p) = (unsafe { p.as_mut() }) else {
        return -libc::EINVAL;
    };
    match catch_unwind(AssertUnwindSafe(|| p.inner.wait_next_period())) {
        Ok(Ok(r)) => {
            // SAFETY: valid or NULL per the contract.
            unsafe {
                if let Some(l) = lateness_ns.as_mut() {
                    *l = r.lateness.min(i64::MAX as u64) as i64;
                }
                if let Some(m) = missed.as_mut() {
                    *m = r.missed;
                }
            }
            0
        }
        Ok(Err(e)) => -e.errno(),
        Err(_) => -libc::EIO,
    }
}

/// # Safety
/// `p` as above; `buf` must be NULL (with `buflen` 0) or hold `buflen` bytes.
#[no_mangle]
pub unsafe extern "C" fn punctual_periodic_stats_json(
    p: *const PunctualPeriodic,
    buf: *mut c_char,
    buflen: usize,
) -> c_int {
    // SAFETY: handle from this library or NULL.
    let Some(p) = (unsafe { p.as_ref() }) else {
        return -libc::EINVAL;
    };
    if buf.is_null() && buflen > 0 {
        return -libc::EINVAL;
    }
    let Ok(json) = catch_unwind(AssertUnwindSafe(|| p.inner.stats_json(&p.name))) else {
        return -libc::EIO;
    };
    if buflen > 0 {
        let n = json.len().min(buflen - 1);
        // SAFETY: buf holds buflen bytes; we write n + 1 <= buflen.
        unsafe {
            std::ptr::copy_nonoverlapping(json.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
    }
    json.len().min(c_int::MAX as usize) as c_int
}

/// # Safety
/// `p` must come from this library (or be NULL) and not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn punctual_periodic_free(p: *mut PunctualPeriodic) {
    if !p.is_null() {
        // SAFETY: created by Box::into_raw in this library.
        drop(unsafe { Box::from_raw(p) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_wait_stats_free() {
        // A long period, so a busy test machine does not make the test miss releases.
        let p = punctual_periodic_new(20_000_000, 0, 0);
        assert!(!p.is_null());
        let (mut l, mut m) = (-1i64, 99u64);
        for _ in 0..3 {
            // SAFETY: `p` is a live handle from punctual_periodic_new; the out-pointers are
            // locals alive across the call.
            assert_eq!(unsafe { punctual_wait_next_period(p, &mut l, &mut m) }, 0);
            assert!(l >= 0);
            assert!(m < 99, "missed was written");
        }
        // SAFETY: a live handle; a NULL buffer of length 0 asks only for the length.
        let need = unsafe { punctual_periodic_stats_json(p, std::ptr::null_mut(), 0) };
        assert!(need > 100);
        let mut small = [0 as c_char; 8];
        assert_eq!(
            // SAFETY: a live handle; `small` holds the 8 bytes passed as its length.
            unsafe { punctual_periodic_stats_json(p, small.as_mut_ptr(), 8) },
            need
        );
        assert_eq!(small[7], 0);
        let mut buf = vec![0 as c_char; need as usize + 1];
        assert_eq!(
            // SAFETY: a live handle; `buf` holds the `buf.len()` bytes passed as its length.
            unsafe { punctual_periodic_stats_json(p, buf.as_mut_ptr(), buf.len()) },
            need
        );
        // SAFETY: stats_json NUL-terminated what it wrote within `buf`, which outlives `text`.
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["count"], 3);
        // SAFETY: `p` came from punctual_periodic_new and is not used after this.
        unsafe { punctual_periodic_free(p) };
    }

    #[test]
    fn errors_come_back_as_null_and_errno_or_negative_errno() {
        assert!(punctual_periodic_new(0, 0, 0).is_null());
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EINVAL)
        );
        assert_eq!(
            // SAFETY: NULL handle and NULL out-pointers, allowed by the contract.
            unsafe {
                punctual_wait_next_period(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            },
            -libc::EINVAL
        );
        assert_eq!(
            // SAFETY: NULL handle and a NULL buffer of length 0, allowed by the contract.
            unsafe { punctual_periodic_stats_json(std::ptr::null(), std::ptr::null_mut(), 0) },
            -libc::EINVAL
        );
        // SAFETY: a NULL channel name is allowed by the contract (refused with EINVAL).
        assert!(unsafe { punctual_periodic_attach(std::ptr::null(), 0) }.is_null());
        // SAFETY: freeing NULL is allowed and does nothing.
        unsafe { punctual_periodic_free(std::ptr::null_mut()) };
    }
}
