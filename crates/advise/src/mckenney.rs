//! McKenney's model of real time against real fast (OLS 2008, Figs. 5-7 and Table 1): the kinds of
//! work, their slowdowns on a real-time kernel, and where two configurations' total-delay lines
//! cross. `punctual advise` decides with it; the `mckenney-choose` experiment measures its
//! parameters on this machine. One model, in one place, that both use.

use serde::Serialize;

/// The experiment that measures the model's slowdowns here (its result documents carry them).
pub const CHOOSE: &str = "mckenney-choose";

/// The papers' numbers: McKenney 2008 (OLS paper) and 2009 (RTLWS slides).
pub mod published {
    /// 4-CPU 2.2 GHz x86, -rt kernel, all precautions, 10,000,000 trials.
    pub const RT_MAX_US: &str = "< 20";
    pub const RT_P99999_US: &str = "< 13";
    /// The same on a non-real-time kernel: the 2008 paper "missing the mark by up to 3
    /// milliseconds"; the 2009 slides "more than 3 milliseconds".
    pub const NONRT_MAX: &str = "<= 3,000";
    pub const NONRT2009_MAX: &str = "> 3,000";
    /// The slides, 18 months later on a more recent kernel: 10M samples.
    pub const RT2009_MAX_US: &str = "45";
    pub const RT2009_P99999_US: &str = "< 27";
    pub const TRIALS: &str = "10,000,000";
    /// Fig. 8: calls per parallel task, and the growth of p99.999 and max from 1 to 12 tasks.
    pub const CALLS_PER_TASK: &str = "100,000";
    pub const FIG8_GROWTH: &str = "> 3x";
    /// Beside a kernel build (and four downloads of the source tree).
    pub const BUILD_P99999_US: &str = "59";
    pub const BUILD_MAX_US: &str = "146";
    /// Table 1 (2008): an 8-way allyesconfig 2.6.24 build, average of 3 runs, seconds, real fast
    /// (non-real-time kernel) against real time (-rt kernel).
    pub const TABLE1_REAL_S: (f64, f64) = (1332.6, 1556.2);
    pub const TABLE1_SYS_S: (f64, f64) = (316.6, 657.0);
    /// The 2009 slides' repeat on a newer kernel.
    pub const SLIDES_REAL_S: (f64, f64) = (828.7, 904.1);
    /// The slowdowns Figs. 5-7 apply to the real-time kernel's work: none for user-mode compute,
    /// the build's 16.78 % (Table 1, real) for kernel-heavy work, the 2-to-1 system time for heavy
    /// I/O.
    pub const SLOWDOWN_COMPUTE: f64 = 1.0;
    pub const SLOWDOWN_KERNEL: f64 = TABLE1_REAL_S.1 / TABLE1_REAL_S.0;
    pub const SLOWDOWN_IO: f64 = TABLE1_SYS_S.1 / TABLE1_SYS_S.0;
    /// Figs. 5-7: where the real-time kernel's total delay curve crosses the non-real-time one
    /// (user-mode compute: never; a kernel build: near 10 ms of work; heavy I/O: near 1 ms).
    pub const FIG5_CROSSOVER: &str = "none";
    pub const FIG6_CROSSOVER: &str = "near 10 ms";
    pub const FIG7_CROSSOVER: &str = "near 1 ms";
    /// Principle 2: common real-time practice reserves resources, e.g. CPU utilization at 50 %.
    pub const UTILIZATION_LIMIT: f64 = 0.5;
    /// Fig. 9: work items of hundreds of milliseconds lose any scheduling-latency benefit in the
    /// noise.
    pub const LONG_WORK_NS: u64 = 100_000_000;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkKind {
    /// User-mode computation (Fig. 5): the kernel does not slow it.
    Compute,
    /// Kernel-heavy work, like a build (Fig. 6).
    Kernel,
    /// Heavy I/O (Fig. 7).
    Io,
}

impl std::str::FromStr for WorkKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "compute" => Ok(WorkKind::Compute),
            "kernel" => Ok(WorkKind::Kernel),
            "io" => Ok(WorkKind::Io),
            _ => Err(format!(
                "'{s}' is not a kind of work: compute, kernel or io"
            )),
        }
    }
}

impl WorkKind {
    /// The real-time kernel's slowdown of this work, from the paper.
    pub fn rt_kernel_slowdown(self) -> f64 {
        match self {
            WorkKind::Compute => published::SLOWDOWN_COMPUTE,
            WorkKind::Kernel => published::SLOWDOWN_KERNEL,
            WorkKind::Io => published::SLOWDOWN_IO,
        }
    }
}

/// The key in the result document (and `advise --work-kind`).
pub fn kind_key(k: WorkKind) -> &'static str {
    match k {
        WorkKind::Compute => "compute",
        WorkKind::Kernel => "kernel",
        WorkKind::Io => "io",
    }
}

/// The work duration above which the slower-starting configuration completes first: start_a + w
/// x slow_a = start_b + w x slow_b (Figs. 5-7), when it exists.
pub fn crossover(start_a: u64, slow_a: f64, start_b: u64, slow_b: f64) -> Option<u64> {
    let d_slow = slow_a - slow_b;
    let d_start = start_b as f64 - start_a as f64;
    (d_slow.abs() > 1e-12 && d_start / d_slow > 0.0).then(|| (d_start / d_slow) as u64)
}
