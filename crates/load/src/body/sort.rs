//! Etsion's sort workload: an array that fills half of the L2 cache, refilled with pseudo-random
//! numbers and sorted with introsort (the algorithm of the STL that shipped with gcc), again and
//! again. Throughput is numbers sorted per second; its drop under shorter quanta is the indirect cost
//! of context switches (cache refills), Etsion Figs. 2, 3 and 8.

use std::sync::atomic::{AtomicBool, Ordering};

/// The L2 cache size of `cpu` in bytes, from sysfs; `None` when the kernel does not say.
pub fn l2_cache_bytes(cpu: usize) -> Option<usize> {
    cache_bytes(cpu, 2)
}

/// The size of the unified or data cache at `level` of `cpu`, from sysfs.
pub fn cache_bytes(cpu: usize, level: u32) -> Option<usize> {
    let base = format!("/sys/devices/system/cpu/cpu{cpu}/cache");
    for entry in std::fs::read_dir(base).ok()?.flatten() {
        let dir = entry.path();
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .ok()
                .map(|s| s.trim().to_string())
        };
        if read("level").and_then(|l| l.parse::<u32>().ok()) != Some(level) {
            continue;
        }
        if read("type").as_deref() == Some("Instruction") {
            continue;
        }
        return read("size").and_then(|s| parse_cache_size(&s));
    }
    None
}

fn parse_cache_size(s: &str) -> Option<usize> {
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok().map(|n| n * mult)
}

/// Numbers in one sort: half the L2 cache of 4-byte numbers (Etsion: 256 KiB L2, so 32 Ki numbers),
/// with the paper's 256 KiB when sysfs does not say.
pub fn array_len(cpu: Option<usize>) -> usize {
    let l2 = l2_cache_bytes(cpu.unwrap_or(0)).unwrap_or(256 << 10);
    (l2 / 2 / std::mem::size_of::<u32>()).max(1024)
}

/// Sort until `stop`; returns numbers sorted (whole sorts only).
pub fn run(stop: &AtomicBool, cpu: Option<usize>) -> u64 {
    let n = array_len(cpu);
    let mut v = vec![0u32; n];
    // The same pseudo-random sequence every run, as the paper used the same sequences everywhere.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut sorted = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for e in v.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *e = (x >> 32) as u32;
        }
        introsort(&mut v);
        debug_assert!(v.windows(2).all(|w| w[0] <= w[1]));
        sorted += n as u64;
    }
    sorted
}

const SMALL: usize = 16;

/// Introsort (Musser): quicksort with median-of-three pivots, switching to heapsort when the
/// recursion depth passes 2 log2(n), and insertion sort for short ranges.
pub fn introsort(v: &mut [u32]) {
    let depth = 2 * (usize::BITS - v.len().leading_zeros()) as usize;
    intro(v, depth);
}

fn intro(mut v: &mut [u32], mut depth: usize) {
    while v.len() > SMALL {
        if depth == 0 {
            heapsort(v);
            return;
        }
        depth -= 1;
        let p = partition(v);
        // Recurse into the smaller side, loop on the larger: the stack stays O(log n).
        let (lo, hi) = v.split_at_mut(p);
        if lo.len() < hi.len() {
            intro(lo, depth);
            v = hi;
        } else {
            intro(hi, depth);
            v = lo;
        }
    }
    insertion(v);
}

/// Hoare partition around the median of the first, middle and last element. Returns `p` with
/// `v[..p] <= pivot <= v[p..]`, both sides non-empty.
fn partition(v: &mut [u32]) -> usize {
    let (a, b, c) = (0, v.len() / 2, v.len() - 1);
    if v[b] < v[a] {
        v.swap(a, b);
    }
    if v[c] < v[b] {
        v.swap(b, c);
        if v[b] < v[a] {
            v.swap(a, b);
        }
    }
    let pivot = v[b];
    let (mut i, mut j) = (0usize, v.len() - 1);
    loop {
        while v[i] < pivot {
            i += 1;
        }
        while v[j] > pivot {
            j -= 1;
        }
        if i >= j {
            return j + 1;
        }
        v.swap(i, j);
        i += 1;
        j -= 1;
    }
}

fn insertion(v: &mut [u32]) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

fn heapsort(v: &mut [u32]) {
    fn sift(v: &mut [u32], mut root: usize, end: usize) {
        loop {
            let mut child = 2 * root + 1;
            if child >= end {
                return;
            }
            if child + 1 < end && v[child] < v[child + 1] {
                child += 1;
            }
            if v[root] >= v[child] {
                return;
            }
            v.swap(root, child);
            root = child;
        }
    }
    for i in (0..v.len() / 2).rev() {
        sift(v, i, v.len());
    }
    for end in (1..v.len()).rev() {
        v.swap(0, end);
        sift(v, 0, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn introsort_sorts_like_the_standard_library(mut v in proptest::collection::vec(any::<u32>(), 0..2000)) {
            let mut want = v.clone();
            want.sort_unstable();
            introsort(&mut v);
            prop_assert_eq!(v, want);
        }

        #[test]
        fn heapsort_alone_sorts(mut v in proptest::collection::vec(0u32..50, 0..300)) {
            let mut want = v.clone();
            want.sort_unstable();
            heapsort(&mut v);
            prop_assert_eq!(v, want);
        }
    }

    #[test]
    fn adversarial_inputs_stay_sorted() {
        // Sorted, reversed, all equal and organ-pipe inputs: the depth limit must hand over to heapsort
        // rather than recurse n deep.
        let n = 100_000u32;
        for mut v in [
            (0..n).collect::<Vec<_>>(),
            (0..n).rev().collect(),
            vec![7; n as usize],
            (0..n / 2).chain((0..n / 2).rev()).collect(),
        ] {
            introsort(&mut v);
            assert!(v.windows(2).all(|w| w[0] <= w[1]));
        }
    }

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_cache_size("512K"), Some(512 << 10));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("x"), None);
        assert!(array_len(None) >= 1024);
    }
}
