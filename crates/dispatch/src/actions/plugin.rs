//! `plugin`: a function in a shared library, loaded with `dlopen` from the explicit path in the plan
//! (never searched for) and called on the dispatcher thread at the instant, like KURT's real-time
//! modules ran in the kernel. The symbol (default `punctual_event`) has the C type
//!
//! ```c
//! int punctual_event(const uint8_t *data, size_t len, uint64_t release_ns);
//! ```
//!
//! `data` holds the event's bytes (empty for periodic tasks), `release_ns` the release instant on
//! CLOCK_MONOTONIC. A non-zero return counts as an error. A plugin that never returns is caught by the
//! watchdog.

use super::{ActionImpl, ActionReport};
use crate::engine::Fired;
use std::ffi::{c_int, c_void, CStr, CString};
use std::path::Path;

pub type EventFn = unsafe extern "C" fn(*const u8, usize, u64) -> c_int;

pub struct Plugin {
    _handle: *mut c_void,
    f: EventFn,
    calls: u64,
    failures: u64,
}

// SAFETY: the handle is only kept to hold the library loaded; the function is called from the one
// dispatcher thread that owns this value.
unsafe impl Send for Plugin {}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a thread-local C string.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null C string from dlerror.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Load `path` and find `symbol`: the library's handle and the function. Errors say what is wrong
/// and what a plugin must export.
fn open(path: &Path, symbol: &str) -> Result<(*mut c_void, EventFn), String> {
    if !path.exists() {
        return Err(format!("plugin {} does not exist", path.display()));
    }
    if !path.is_file() {
        return Err(format!(
            "plugin {} is not a regular file; give the path of a shared library",
            path.display()
        ));
    }
    let cpath = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| "plugin path contains a NUL byte".to_string())?;
    // SAFETY: loading a library the user named; its constructors run here, before the run.
    let h = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return Err(format!(
            "plugin {} cannot be loaded: {}",
            path.display(),
            dlerror()
        ));
    }
    let csym = CString::new(symbol).map_err(|_| "plugin symbol contains a NUL byte".to_string())?;
    // SAFETY: looking up a symbol in a handle we hold.
    let s = unsafe { libc::dlsym(h, csym.as_ptr()) };
    if s.is_null() {
        // SAFETY: closing the handle we opened.
        unsafe { libc::dlclose(h) };
        return Err(format!(
            "plugin {} has no symbol '{symbol}'; a plugin exports `int {symbol}(const uint8_t *data, size_t len, uint64_t release_ns)`",
            path.display()
        ));
    }
    // SAFETY: the plugin contract documents this signature.
    let f: EventFn = unsafe { std::mem::transmute::<*mut c_void, EventFn>(s) };
    Ok((h, f))
}

/// Whether `prepare` would succeed: the library loads exactly as for the run (RTLD_NOW, so a
/// missing dependency or symbol shows here) and exports `symbol`; it is closed again.
pub fn probe(path: &Path, symbol: &str) -> Result<(), String> {
    let (h, _) = open(path, symbol)?;
    // SAFETY: closing the handle `open` gave us; nothing from it is kept.
    unsafe { libc::dlclose(h) };
    Ok(())
}

/// Largest plugin [`inspect`] reads (a shared library this size is not a dispatcher plugin).
const MAX_PLUGIN_BYTES: u64 = 1 << 30;

/// The architecture this punctual was built for, as `object` names it.
fn host_architecture() -> Option<object::Architecture> {
    use object::Architecture as A;
    if cfg!(target_arch = "x86_64") {
        Some(A::X86_64)
    } else if cfg!(target_arch = "aarch64") {
        Some(A::Aarch64)
    } else if cfg!(target_arch = "riscv64") {
        Some(A::Riscv64)
    } else {
        None
    }
}

/// What can be known of a plugin without running any of its code (`plan check`, which may run as
/// root, must not `dlopen` it: constructors run at load). The file is read, not loaded: it must be
/// an ELF shared object for this machine's architecture whose dynamic symbol table defines
/// `symbol` as a function. What only loading shows (a missing dependency, a failing constructor)
/// `run` finds when it loads the plugin, before it changes anything ([`probe`]).
pub fn inspect(path: &Path, symbol: &str) -> Result<(), String> {
    let entry = format!(
        "a plugin exports `int {symbol}(const uint8_t *data, size_t len, uint64_t release_ns)`"
    );
    inspect_library("plugin", path, symbol, &entry)
}

/// The checks of [`inspect`] for any shared library (`what` names it in messages, `hint` follows
/// a missing symbol): read, never loaded.
pub fn inspect_library(what: &str, path: &Path, symbol: &str, hint: &str) -> Result<(), String> {
    use object::{Object, ObjectSymbol};
    let shown = format!("{what} {}", punctual_rt::text::display_path(path));
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{shown} does not exist"),
        _ => format!("{shown}: {e}"),
    })?;
    if !meta.is_file() {
        return Err(format!(
            "{shown} is not a regular file; give the path of a shared library"
        ));
    }
    if meta.len() > MAX_PLUGIN_BYTES {
        return Err(format!(
            "{shown} is {} MB, larger than any such library should be ({} MB)",
            meta.len() >> 20,
            MAX_PLUGIN_BYTES >> 20
        ));
    }
    let data = std::fs::read(path).map_err(|e| format!("{shown}: {e}"))?;
    let not_lib = |why: String| {
        format!("{shown} is not a shared library ({why}); build it with `cc -shared -fPIC`")
    };
    if !data.starts_with(b"\x7fELF") {
        return Err(not_lib("no ELF header".into()));
    }
    let file = object::File::parse(&*data).map_err(|e| not_lib(e.to_string()))?;
    if file.kind() != object::ObjectKind::Dynamic {
        return Err(not_lib(format!("an ELF file of kind {:?}", file.kind())));
    }
    if let Some(host) = host_architecture() {
        if file.architecture() != host {
            return Err(format!(
                "{shown} is built for {:?}; this machine runs {host:?}",
                file.architecture()
            ));
        }
    }
    let entry = hint;
    let found = file
        .dynamic_symbols()
        .find(|s| s.name_bytes().ok() == Some(symbol.as_bytes()) && s.is_definition());
    match found {
        None => Err(format!(
            "{shown} has no symbol '{}'; {entry}",
            punctual_rt::text::display_name(symbol)
        )),
        Some(s) if s.kind() != object::SymbolKind::Text => Err(format!(
            "{shown} exports '{}' but not as a function ({:?}); {entry}",
            punctual_rt::text::display_name(symbol),
            s.kind()
        )),
        Some(_) => Ok(()),
    }
}

impl Plugin {
    /// Load `path` and find `symbol`. Errors say what is wrong and what a plugin must export.
    pub fn prepare(path: &Path, symbol: &str) -> Result<Plugin, String> {
        let (h, f) = open(path, symbol)?;
        Ok(Plugin {
            _handle: h,
            f,
            calls: 0,
            failures: 0,
        })
    }
}

impl ActionImpl for Plugin {
    #[inline]
    fn fire(&mut self, target: u64, _seq: u64, data: &[u8]) -> Fired {
        self.calls += 1;
        // SAFETY: calling the plugin's documented entry point with a valid slice.
        let rc = unsafe { (self.f)(data.as_ptr(), data.len(), target) };
        if rc != 0 {
            self.failures += 1;
        }
        Fired {
            error: rc != 0,
            previous: None,
        }
    }

    fn report(self: Box<Self>) -> ActionReport {
        ActionReport {
            start_latency: None,
            extra: vec![
                ("calls".into(), self.calls.into()),
                ("failures".into(), self.failures.into()),
            ],
        }
    }
}
