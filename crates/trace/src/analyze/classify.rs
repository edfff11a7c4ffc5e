//! Which kernel subsystem an interrupt-context source belongs to, in the categories of KURT's Table
//! 4.3. The seed measured how long each subsystem's code kept interrupts disabled; a patch-free
//! kernel shows the handlers instead: device interrupt handlers and system vectors run with
//! interrupts disabled, softirqs block every task on their CPU. The mapping is by driver, by IRQ name,
//! by vector and by softirq number; what fits nowhere is "other".

use crate::event::Vector;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Console,
    Network,
    Disk,
    Process,
    Timer,
    Memory,
    Other,
}

impl Category {
    pub const ALL: [Category; 7] = [
        Category::Console,
        Category::Network,
        Category::Disk,
        Category::Process,
        Category::Timer,
        Category::Memory,
        Category::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::Console => "Console",
            Category::Network => "Network",
            Category::Disk => "Disk",
            Category::Process => "Process",
            Category::Timer => "Timer",
            Category::Memory => "Memory",
            Category::Other => "Other",
        }
    }

    /// KURT's description of the category.
    pub fn description(self) -> &'static str {
        match self {
            Category::Console => "Console (TTY) code",
            Category::Network => "Network device driver and protocol stack code",
            Category::Disk => "Disk device driver and buffer management code",
            Category::Process => "Scheduling and run-queue management code",
            Category::Timer => "Timer handling and time query code",
            Category::Memory => "Memory management code",
            Category::Other => "All other code (mainly routines interfacing with the PCI BIOS)",
        }
    }

    /// KURT Table 4.3 (min, mean, max in microseconds), on the thesis' Pentium Pro (it names no kernel version).
    pub fn kurt_table_4_3(self) -> (f64, f64, f64) {
        match self {
            Category::Console => (0.51, 0.86, 12.13),
            Category::Network => (0.35, 0.64, 2.74),
            Category::Disk => (0.55, 34.68, 250.45),
            Category::Process => (0.48, 1.47, 12.06),
            Category::Timer => (0.50, 1.81, 40.65),
            Category::Memory => (0.49, 1.40, 6.40),
            Category::Other => (1.48, 2.34, 7.55),
        }
    }
}

const DISK_DRIVERS: &[&str] = &[
    "virtio_blk",
    "virtio_scsi",
    "nvme",
    "ahci",
    "ata_piix",
    "ata_generic",
    "pata_",
    "megaraid",
    "mpt3sas",
    "sdhci",
    "mmc",
    "xen_blkfront",
    "hv_storvsc",
    "vmw_pvscsi",
    "sym53c8xx",
    "usb-storage",
    "uas",
];
const NET_DRIVERS: &[&str] = &[
    "virtio_net",
    "e1000",
    "igb",
    "igc",
    "ixgbe",
    "i40e",
    "ice",
    "r8169",
    "tg3",
    "bnx2",
    "bnxt",
    "mlx",
    "iwlwifi",
    "ath",
    "rtw",
    "brcm",
    "vmxnet",
    "ena",
    "gve",
    "hv_netvsc",
    "xen_netfront",
    "vmw_vsock",
    "vsock",
];
const CONSOLE_DRIVERS: &[&str] = &[
    "virtio_console",
    "serial",
    "8250",
    "i8042",
    "atkbd",
    "hid",
    "usbhid",
    "virtio_input",
];

fn any_prefix(s: &str, list: &[&str]) -> bool {
    list.iter().any(|p| s.starts_with(p))
}

/// A device interrupt, by the driver bound to its device (when known) and its name.
pub fn classify_irq(name: &str, driver: Option<&str>) -> Category {
    if let Some(d) = driver {
        if any_prefix(d, DISK_DRIVERS) {
            return Category::Disk;
        }
        if any_prefix(d, NET_DRIVERS) {
            return Category::Network;
        }
        if any_prefix(d, CONSOLE_DRIVERS) {
            return Category::Console;
        }
        if d.starts_with("virtio_balloon") || d.starts_with("virtio_mem") {
            return Category::Memory;
        }
    }
    let n = name.to_ascii_lowercase();
    if [
        "nvme", "ahci", "ata", "blk", "scsi", "mmc", "sdhci", "-req.",
    ]
    .iter()
    .any(|k| n.contains(k))
    {
        Category::Disk
    } else if [
        "eth", "enp", "eno", "ens", "wlan", "wlp", "-rx", "-tx", "-input.", "-output.",
    ]
    .iter()
    .any(|k| n.contains(k))
    {
        Category::Network
    } else if ["tty", "serial", "i8042", "kbd", "hvc", "console"]
        .iter()
        .any(|k| n.contains(k))
    {
        Category::Console
    } else if ["timer", "rtc", "hpet"].iter().any(|k| n.contains(k)) {
        Category::Timer
    } else {
        Category::Other
    }
}

/// System vectors: the local timer is the tick and every hrtimer; reschedule IPIs carry remote
/// wake-ups and preemptions; cross-CPU function calls are mostly TLB shootdowns (on a two-CPU machine
/// they all use the single-target vector).
pub fn classify_vector(v: Vector) -> Category {
    match v {
        Vector::LocalTimer => Category::Timer,
        Vector::Reschedule => Category::Process,
        Vector::CallFunction | Vector::CallFunctionSingle => Category::Memory,
        _ => Category::Other,
    }
}

pub fn classify_softirq(vec: u32) -> Category {
    match vec {
        1 | 8 => Category::Timer,
        2 | 3 => Category::Network,
        4 | 5 => Category::Disk,
        7 => Category::Process,
        _ => Category::Other,
    }
}

/// hrtimer callbacks by symbol: scheduler timers are scheduling, the rest timer handling.
pub fn classify_hrtimer(symbol: &str) -> Category {
    if ["sched_", "hrtick", "rt_period", "cfs_"]
        .iter()
        .any(|k| symbol.contains(k))
    {
        Category::Process
    } else if symbol.contains("watchdog") {
        Category::Other
    } else {
        Category::Timer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_by_driver_then_name() {
        assert_eq!(
            classify_irq("virtio1-req.0", Some("virtio_blk")),
            Category::Disk
        );
        assert_eq!(
            classify_irq("virtio2-input.0", Some("virtio_net")),
            Category::Network
        );
        assert_eq!(
            classify_irq("virtio3-rx", Some("vmw_vsock_virtio_transport")),
            Category::Network
        );
        assert_eq!(
            classify_irq("virtio0-stats", Some("virtio_balloon")),
            Category::Memory
        );
        assert_eq!(classify_irq("nvme0q3", None), Category::Disk);
        assert_eq!(classify_irq("enp3s0-rx-0", None), Category::Network);
        assert_eq!(classify_irq("ttyS0", None), Category::Console);
        assert_eq!(classify_irq("rtc0", None), Category::Timer);
        assert_eq!(classify_irq("ACPI:Ged", None), Category::Other);
        assert_eq!(classify_vector(Vector::LocalTimer), Category::Timer);
        assert_eq!(
            classify_vector(Vector::CallFunctionSingle),
            Category::Memory
        );
        assert_eq!(classify_softirq(3), Category::Network);
        assert_eq!(classify_softirq(9), Category::Other);
        assert_eq!(classify_hrtimer("tick_nohz_handler"), Category::Timer);
        assert_eq!(classify_hrtimer("sched_rt_period_timer"), Category::Process);
    }
}
