//! The seeds' published numbers, transcribed exactly. Experiments print them beside this machine's;
//! tests check that they appear unchanged.

/// Etsion et al. 2003, Table 6: alarm latency (us) at percentiles 0.9, 0.95, 0.99 and the maximum,
/// at 100 Hz with 60 ms quanta and at 20,000 Hz with 100 us quanta.
pub struct Table6Row {
    pub ty: &'static str,
    pub number: &'static str,
    /// This crate's workload for the row (the simulator's labels).
    pub workload: &'static str,
    pub hz100: [&'static str; 4],
    pub hz20000: [&'static str; 4],
}

/// Etsion et al. 2003, Fig. 7 (left, 100 Hz with 60 ms quanta): the share of CONT processes' timer
/// signals delivered within one tick, for 2, 4 and 8 processes, as read off the figure's Y axis in
/// the text, beside the probability of running next (1/2, 1/4, 1/8).
pub const FIG7_WITHIN_TICK: [(usize, &str, &str); 3] =
    [(2, "0.53", "1/2"), (4, "0.30", "1/4"), (8, "0.16", "1/8")];

pub const TABLE6: [Table6Row; 10] = [
    Table6Row {
        ty: "BLK",
        number: "2",
        workload: "blk:2",
        hz100: ["5", "8", "11", "40"],
        hz20000: ["13", "14", "21", "23"],
    },
    Table6Row {
        ty: "BLK",
        number: "8",
        workload: "blk:8",
        hz100: ["5", "12", "22", "420"],
        hz20000: ["7", "9", "13", "25"],
    },
    Table6Row {
        ty: "CONT",
        number: "2",
        workload: "cont:2",
        hz100: ["50,003", "60,003", "60,004", "160,006"],
        hz20000: ["102", "103", "18,468", "60,448"],
    },
    Table6Row {
        ty: "CONT",
        number: "8",
        workload: "cont:8",
        hz100: ["370,014", "400,014", "420,015", "740,025"],
        hz20000: ["656", "706", "15,096", "68,139"],
    },
    Table6Row {
        ty: "2%",
        number: "2",
        workload: "pct2:2",
        hz100: ["6", "9", "9,193", "19,153"],
        hz20000: ["13", "15", "23", "837"],
    },
    Table6Row {
        ty: "2%",
        number: "8",
        workload: "pct2:8",
        hz100: ["2,910", "8,419", "17,940", "32,944"],
        hz20000: ["12", "52", "53", "1,809"],
    },
    Table6Row {
        ty: "8%",
        number: "2",
        workload: "pct8:2",
        hz100: ["9", "12,431", "39,512", "60,003"],
        hz20000: ["14", "19", "53", "3,797"],
    },
    Table6Row {
        ty: "8%",
        number: "8",
        workload: "pct8:8",
        hz100: ["40,003", "60,005", "130,006", "294,291"],
        hz20000: ["53", "53", "54", "37,328"],
    },
    Table6Row {
        ty: "4%",
        number: "1+2CPU",
        workload: "pct4:1,cpu:2",
        hz100: ["50,003", "50,003", "50,004", "50,005"],
        hz20000: ["55", "56", "200", "256"],
    },
    Table6Row {
        ty: "4%",
        number: "1+8CPU",
        workload: "pct4:1,cpu:8",
        hz100: ["50,003", "50,003", "170,014", "280,010"],
        hz20000: ["56", "57", "59", "856"],
    },
];

/// Etsion Table 1: clock interrupt processing (cycles ± sd, us), with the 8253 access and without.
pub const TABLE1: [[&str; 5]; 7] = [
    ["P-90", "814 ± 180", "9.02", "498 ± 466", "5.53"],
    ["PP-200", "1654 ± 553", "8.31", "462 ± 762", "2.32"],
    ["PII-350", "2342 ± 303", "6.71", "306 ± 311", "0.88"],
    ["PIII-664", "3972 ± 462", "5.98", "327 ± 487", "0.49"],
    ["PIII-1.133", "6377 ± 602", "5.64", "426 ± 914", "0.38"],
    ["PIV-2.4", "14603 ± 436", "6.11", "445 ± 550", "0.19"],
    ["A1.467", "10494 ± 396", "7.15", "202 ± 461", "0.14"],
];

/// Etsion Table 2: context switch (cycles ± sd, us), cache bandwidth (MB/s ± sd), trap (cycles ± sd, us).
pub const TABLE2: [[&str; 6]; 7] = [
    ["P-90", "1871 ± 656", "20.75", "28 ± 1", "153 ± 24", "1.70"],
    [
        "PP-200",
        "1530 ± 389",
        "7.69",
        "705 ± 26",
        "379 ± 75",
        "1.91",
    ],
    [
        "PII-350",
        "1327 ± 331",
        "3.80",
        "1314 ± 29",
        "343 ± 68",
        "0.98",
    ],
    [
        "PIII-664",
        "1317 ± 424",
        "1.98",
        "2512 ± 32",
        "348 ± 163",
        "0.52",
    ],
    [
        "PIII-1.133",
        "1330 ± 441",
        "1.18",
        "4286 ± 82",
        "364 ± 278",
        "0.32",
    ],
    [
        "PIV-2.4",
        "3792 ± 857",
        "1.59",
        "3016 ± 47",
        "1712 ± 32",
        "0.72",
    ],
    [
        "A1.467",
        "1436 ± 477",
        "0.98",
        "3962 ± 63",
        "274 ± 20",
        "0.19",
    ],
];

/// Etsion section 3: one sort of the array on a PIII-664, one process, 50 ms quanta.
pub const SORT_MS_100HZ: &str = "12.675";
pub const SORT_MS_10000HZ: &str = "13.397";
/// Etsion Fig. 8 (8 processes): numbers sorted per second.
pub const FIG8_PIII664_BASE: &str = "2,559,000";
pub const FIG8_PIII1133_EXTREME: &str = "3,136,000";

/// Etsion et al. 2003, Section 3 and Figs. 2 and 3: the added overhead of a faster clock for the
/// sort, and the worked example that splits it into direct and indirect overhead.
pub mod etsion_overhead {
    /// The worked example: a P-III 664 MHz running one sorting process with 50 ms quanta. One sort
    /// takes 12.675 ms at 100 Hz and 13.397 ms at 10,000 Hz.
    pub const SPLIT_MS_100HZ: f64 = 12.675;
    pub const SPLIT_MS_10000HZ: f64 = 13.397;
    /// 10,000 Hz has 9900 more interrupts a second: 9900 x 0.013397 = 133 during one sort.
    pub const SPLIT_EXTRA_PER_S: u64 = 9900;
    pub const SPLIT_EXTRA_INTERRUPTS: u64 = 133;
    /// Table 1's cost of one interrupt without the 8253 access, us, and their total: 133 x 0.49 = 65 us.
    pub const SPLIT_DIRECT_US_EACH: f64 = 0.49;
    pub const SPLIT_DIRECT_US: u64 = 65;
    /// The difference in the time to sort: 13397 - 12675 = 722 us; 722 - 65 = 657 us indirect.
    pub const SPLIT_DIFFERENCE_US: u64 = 722;
    pub const SPLIT_INDIRECT_US: u64 = 657;
    /// 657 / 722: 91 % indirect, only 9 % direct.
    pub const SPLIT_INDIRECT_PCT: u64 = 91;
    pub const SPLIT_DIRECT_PCT: u64 = 9;
    /// "The indirect overhead on the P-IV and Athlon machines, and when using shorter quanta on all
    /// machines, are higher, and may even reach 99%."
    pub const SPLIT_SHORT_QUANTA: &str = "higher, up to 99 %";
    /// Fig. 2 (50 ms quanta): "the added overhead at 1000 Hz is negligible, and even at 5000 Hz it
    /// is quite low"; above, it grows linearly; 8 processes give essentially the same.
    pub const FIG2_1000HZ: &str = "negligible";
    pub const FIG2_5000HZ: &str = "quite low";
    /// Section 7 on Fig. 3 (6-tick quanta): at 20,000 Hz "the additional overhead can reach 35%".
    pub const FIG3_20000HZ_PCT: f64 = 35.0;
    /// The sort's array: "about half of the L2 cache", 256 KB on the P-III 664.
    pub const L2_KIB: u64 = 256;
}

/// Zeadally: one row of Tables 1-4 (microseconds): minimum, median, maximum, mean, standard deviation.
pub struct ZeadallyRow {
    pub label: &'static str,
    pub values: [&'static str; 5],
}

pub const ZEADALLY_T1: [ZeadallyRow; 4] = [
    ZeadallyRow {
        label: "Interrupt latency (SVR4.0)",
        values: ["23", "27", "100", "26", "7.65"],
    },
    ZeadallyRow {
        label: "Interrupt latency (SVR4.2)",
        values: ["25", "29", "95", "28", "17.47"],
    },
    ZeadallyRow {
        label: "Context switch time (SVR4.0)",
        values: ["80", "84", "8500", "86", "158.95"],
    },
    ZeadallyRow {
        label: "Context switch time (SVR4.2)",
        values: ["72", "76", "2800", "77", "51.2"],
    },
];
pub const ZEADALLY_T2: [ZeadallyRow; 4] = [
    ZeadallyRow {
        label: "Interrupt latency (SVR4.0)",
        values: ["24", "27", "275", "27", "7.46"],
    },
    ZeadallyRow {
        label: "Interrupt latency (SVR4.2)",
        values: ["25", "29", "245", "29", "8.48"],
    },
    ZeadallyRow {
        label: "Scheduling latency (SVR4.0)",
        values: ["80", "80", "9600", "89", "191.23"],
    },
    ZeadallyRow {
        label: "Scheduling latency (SVR4.2)",
        values: ["68", "72", "9600", "92", "326.93"],
    },
];
pub const ZEADALLY_T3: [ZeadallyRow; 2] = [
    ZeadallyRow {
        label: "Scheduling latency (SVR4.2)",
        values: ["72", "76", "3272", "121", "184.45"],
    },
    ZeadallyRow {
        label: "Scheduling latency (SVR4.0)",
        values: ["80", "80", "5544", "149", "257.91"],
    },
];
pub const ZEADALLY_T4: [ZeadallyRow; 2] = [
    ZeadallyRow {
        label: "Scheduling latency (SVR4.2, preemption points on)",
        values: ["72", "76", "3272", "121", "184.45"],
    },
    ZeadallyRow {
        label: "Scheduling latency (SVR4.2, preemption points off)",
        values: ["72", "72", "7424", "123", "298.72"],
    },
];

/// McKenney 2008 (OLS paper) and 2009 (RTLWS slides): with the model `punctual advise` and
/// `mckenney-choose` share, in `punctual-advise`.
pub use punctual_advise::mckenney::published as mckenney;

/// KURT (Srinivasan 1998), Tables 4.1 and 4.2: % of iterations within 10/50/100/500/1000 us of the
/// 10 ms period, rows for 1, 10, 20, 30 processes.
pub mod kurt {
    pub const THESIS_FIFO_IDLE: [[f64; 5]; 4] = [
        [62.22, 99.59, 99.80, 100.0, 100.0],
        [3.36, 15.12, 30.25, 99.34, 99.72],
        [1.44, 7.45, 14.76, 66.48, 99.78],
        [1.21, 6.10, 11.03, 46.61, 73.11],
    ];
    pub const THESIS_KURT_ALL_IDLE: [[f64; 5]; 4] = [
        [99.80, 100.0, 100.0, 100.0, 100.0],
        [96.66, 99.47, 99.67, 100.0, 100.0],
        [99.34, 99.67, 99.91, 100.0, 100.0],
        [97.33, 99.54, 99.80, 99.99, 100.0],
    ];
    pub const THESIS_KURT_PROCS_IDLE: [[f64; 5]; 4] = [
        [99.80, 99.80, 100.0, 100.0, 100.0],
        [96.61, 99.72, 99.87, 100.0, 100.0],
        [99.23, 99.40, 99.61, 99.80, 100.0],
        [99.52, 99.75, 99.89, 100.0, 100.0],
    ];
    pub const THESIS_FIFO_DISK: [[f64; 5]; 4] = [
        [50.20, 81.33, 83.74, 98.99, 99.59],
        [5.50, 17.19, 30.70, 84.40, 92.25],
        [2.00, 7.07, 13.21, 55.50, 84.20],
        [1.09, 4.71, 8.65, 36.47, 64.32],
    ];
    pub const THESIS_KURT_ALL_DISK: [[f64; 5]; 4] = [
        [40.16, 60.04, 73.89, 97.60, 99.60],
        [68.43, 81.68, 88.61, 97.17, 99.17],
        [87.94, 95.17, 97.37, 99.52, 99.66],
        [56.26, 60.74, 65.27, 82.01, 95.72],
    ];
}

// ---- etsion-billing, etsion-frames, kurt-irq ------------------------------------------------

/// Etsion et al. 2003, Tables 3 and 4 (Linux 2.4.8 on a Pentium III 664, measured with klogger).
pub mod etsion_billing {
    /// One application: Table 3's billing ratio and quanta never billed, Table 4's quanta per
    /// second, each at 100 and 1000 Hz.
    pub struct Table3Row {
        pub app: &'static str,
        pub billing: [f64; 2],
        /// In per cent.
        pub missed_pct: [f64; 2],
        /// Table 4 (each application in isolation); the CPU+Quake row has none.
        pub quanta_per_s: Option<[f64; 2]>,
    }

    pub const TABLE3: [Table3Row; 6] = [
        Table3Row {
            app: "Emacs",
            billing: [1.0746, 0.9468],
            missed_pct: [95.96, 73.42],
            quanta_per_s: Some([22.36, 34.60]),
        },
        Table3Row {
            app: "Xine",
            billing: [1.2750, 1.0249],
            missed_pct: [89.46, 74.81],
            quanta_per_s: Some([470.67, 695.94]),
        },
        Table3Row {
            app: "Quake",
            billing: [1.0310, 1.0337],
            missed_pct: [54.17, 23.23],
            quanta_per_s: Some([187.88, 273.85]),
        },
        Table3Row {
            app: "X Server (w/ Xine)",
            billing: [0.0202, 0.9319],
            missed_pct: [99.43, 64.05],
            quanta_per_s: Some([71.35, 148.21]),
        },
        Table3Row {
            app: "CPU-bound",
            billing: [1.0071, 1.0043],
            missed_pct: [7.86, 7.83],
            quanta_per_s: Some([28.81, 38.97]),
        },
        Table3Row {
            app: "CPU+Quake",
            billing: [1.0333, 1.0390],
            missed_pct: [26.71, 2.36],
            quanta_per_s: None,
        },
    ];

    /// Table 5: where the CPU's time went while Xine played, in per cent at 100 and 1000 Hz.
    pub const TABLE5: [(&str, [f64; 2]); 4] = [
        ("Xine", [39.42, 40.42]),
        ("X Server", [20.10, 20.79]),
        ("idle loop", [31.46, 31.58]),
        ("other", [9.02, 7.21]),
    ];

    /// The paper's row for an application; `X Server` is the paper's `X Server (w/ Xine)`.
    pub fn row(app: &str) -> Option<&'static Table3Row> {
        let app = if app == "X Server" {
            "X Server (w/ Xine)"
        } else {
            app
        };
        TABLE3.iter().find(|r| r.app == app)
    }
}

/// Etsion et al. 2003, Section 5 and Figs. 1 and 5: a player woken at ticks.
pub mod etsion_frames {
    /// Fig. 5's skipping windows for 60 fps at 100 Hz: (from, to) in ms of start shift, the frame
    /// of each three that is skipped.
    pub const FIG5_WINDOWS: [(f64, f64, u64); 3] = [
        (25.0 / 3.0, 10.0, 1),
        (5.0, 20.0 / 3.0, 2),
        (5.0 / 3.0, 10.0 / 3.0, 3),
    ];
    /// Section 5 on 50 fps at 50 Hz.
    pub const FIFTY_AT_50HZ: &str = "all shown or all skipped (black screen)";
    /// Fig. 1 at 60 fps, and at any other rate.
    pub const FIG1_60FPS: &str = "100 Hz: about 40 for half the shifts; 1000 Hz: 60";
    pub const FIG1_OTHER: &str = "achieved at 1000 Hz";
}

// KURT Table 4.3 (`kurt-irq`) lives with the subsystems it classifies, since `punctual trace
// analyze` prints it too: `punctual_trace::analyze::classify::Category::kurt_table_4_3`.
