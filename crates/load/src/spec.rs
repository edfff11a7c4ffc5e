//! `--load` specifications: `KIND[:COUNT][@CPUS]`, comma-separated, e.g. `cpu:2,io:1` or
//! `cpu:2@0-1,io`. Kinds: `cpu`, `sort`, `io`, `find`, `build`, `hackbench`, `mem`. CPU lists after `@` may themselves contain commas (`cpu:3@0,2`): a token that
//! starts with a digit continues the CPU list, a token that starts with a letter starts a new load.

use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadKind {
    /// Busy loop on integer arithmetic.
    Cpu,
    /// Write and fsync 1 MiB blocks in a temporary directory that is removed afterwards.
    Io,
    /// Etsion's sort: fill an array of half the L2 cache with random numbers and introsort it, again
    /// and again.
    Sort,
    /// A recursive directory walk (Zeadally's `find`): mostly system calls, mostly in the kernel.
    Find,
    /// A parallel gcc compile of a generated C project in a temporary directory (McKenney's kernel
    /// build, scaled down): one job per CPU the instance may use.
    Build,
    /// hackbench-style messaging: sender threads write 100-byte messages through pipes to receiver
    /// threads (scheduler and wake-up churn).
    Hackbench,
    /// Page-fault churn: map anonymous memory, touch every page, unmap, again.
    Mem,
}

impl LoadKind {
    pub const ALL: &'static [LoadKind] = &[
        LoadKind::Cpu,
        LoadKind::Sort,
        LoadKind::Io,
        LoadKind::Find,
        LoadKind::Build,
        LoadKind::Hackbench,
        LoadKind::Mem,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LoadKind::Cpu => "cpu",
            LoadKind::Io => "io",
            LoadKind::Sort => "sort",
            LoadKind::Find => "find",
            LoadKind::Build => "build",
            LoadKind::Hackbench => "hackbench",
            LoadKind::Mem => "mem",
        }
    }

    /// What one unit of reported work is.
    pub fn unit(self) -> &'static str {
        match self {
            LoadKind::Cpu => "loop iterations",
            LoadKind::Io => "MiB written and fsynced",
            LoadKind::Sort => "numbers sorted",
            LoadKind::Find => "directory entries visited",
            LoadKind::Build => "C files compiled",
            LoadKind::Hackbench => "messages delivered",
            LoadKind::Mem => "pages faulted in",
        }
    }

    /// Whether instances write into the scratch directory.
    pub fn needs_scratch(self) -> bool {
        matches!(self, LoadKind::Io | LoadKind::Build)
    }

    fn valid_names() -> String {
        Self::ALL
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl FromStr for LoadKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown load '{s}' (valid: {})", Self::valid_names()))
    }
}

/// Instances of one kind, optionally spread over CPUs (round-robin).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadItem {
    pub kind: LoadKind,
    pub count: u32,
    pub cpus: Option<Vec<usize>>,
}

impl LoadItem {
    /// The CPU instance `i` is pinned to, if any.
    pub fn cpu_for(&self, i: u32) -> Option<usize> {
        self.cpus.as_ref().map(|c| c[i as usize % c.len()])
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadSpec {
    pub items: Vec<LoadItem>,
}

/// The most instances one spec may start (a typo like `cpu:2000` should not fork-bomb the machine).
pub const MAX_INSTANCES: u32 = 256;

impl LoadSpec {
    /// A spec as a `--load` flag gives it: not empty (`--load=`, a variable left empty in a
    /// script, is a mistake, not a request for no load; plans and defaults read "" as none), and
    /// its CPUs online.
    pub fn parse_flag(s: &str) -> Result<LoadSpec, String> {
        if s.trim().is_empty() {
            return Err("empty; give e.g. cpu:1,io:1, or none".into());
        }
        let spec: LoadSpec = s.parse()?;
        let cpus: Vec<usize> = spec
            .items
            .iter()
            .flat_map(|i| i.cpus.clone().unwrap_or_default())
            .collect();
        punctual_rt::affinity::check_online(&cpus).map_err(|e| e.to_string())?;
        Ok(spec)
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn instances(&self) -> u32 {
        self.items.iter().map(|i| i.count).sum()
    }
}

impl std::fmt::Display for LoadSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .items
            .iter()
            .map(|i| {
                let mut s = format!("{}:{}", i.kind.name(), i.count);
                if let Some(c) = &i.cpus {
                    s.push('@');
                    s.push_str(&punctual_rt::format_cpu_list(c));
                }
                s
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl FromStr for LoadSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() || s == "none" {
            return Ok(LoadSpec::default());
        }
        // Regroup tokens: a token starting with a digit belongs to the previous item's CPU list.
        let mut groups: Vec<String> = Vec::new();
        for tok in s.split(',') {
            let tok = tok.trim();
            match (tok.chars().next(), groups.last_mut()) {
                (Some(c), Some(last)) if c.is_ascii_digit() && last.contains('@') => {
                    last.push(',');
                    last.push_str(tok);
                }
                (None, _) => return Err(format!("empty item in load spec '{s}'")),
                _ => groups.push(tok.to_string()),
            }
        }
        let mut items = Vec::new();
        for g in groups {
            let (head, cpus) = match g.split_once('@') {
                Some((h, c)) => (
                    h,
                    Some(punctual_rt::parse_cpu_list(c).map_err(|e| format!("load '{g}': {e}"))?),
                ),
                None => (g.as_str(), None),
            };
            let (kind, count) = match head.split_once(':') {
                Some((k, n)) => {
                    let n: u32 = n.trim().parse().map_err(|_| {
                        format!("load '{g}': count '{n}' is not a whole number (write e.g. cpu:2)")
                    })?;
                    (k, n)
                }
                None => (head, 1),
            };
            let kind: LoadKind = kind.trim().parse()?;
            if count == 0 {
                return Err(format!(
                    "load '{g}': a count of 0 starts nothing; drop the item or use 1 or more"
                ));
            }
            items.push(LoadItem { kind, count, cpus });
        }
        let spec = LoadSpec { items };
        if spec.instances() > MAX_INSTANCES {
            return Err(format!(
                "load spec '{s}' starts {} processes; the limit is {MAX_INSTANCES}",
                spec.instances()
            ));
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses() {
        let s: LoadSpec = "cpu:2,io:1".parse().unwrap();
        assert_eq!(s.items.len(), 2);
        assert_eq!((s.items[0].kind, s.items[0].count), (LoadKind::Cpu, 2));
        let s: LoadSpec = "cpu:3@0,2,io".parse().unwrap();
        assert_eq!(s.items[0].cpus, Some(vec![0, 2]));
        assert_eq!(s.items[0].cpu_for(2), Some(0));
        assert_eq!((s.items[1].kind, s.items[1].count), (LoadKind::Io, 1));
        assert!("none".parse::<LoadSpec>().unwrap().is_empty());
        assert_eq!(
            "cpu:2@0-1,io:1".parse::<LoadSpec>().unwrap().to_string(),
            "cpu:2@0-1,io:1"
        );
    }

    #[test]
    fn refuses_with_reasons() {
        assert!("gpu:1"
            .parse::<LoadSpec>()
            .unwrap_err()
            .contains("valid: cpu, sort, io, find, build, hackbench, mem"));
        for k in LoadKind::ALL {
            assert_eq!(k.name().parse::<LoadKind>().unwrap(), *k);
        }
        assert!("cpu:0"
            .parse::<LoadSpec>()
            .unwrap_err()
            .contains("count of 0"));
        assert!("cpu:x"
            .parse::<LoadSpec>()
            .unwrap_err()
            .contains("whole number"));
        assert!("cpu:1000"
            .parse::<LoadSpec>()
            .unwrap_err()
            .contains("limit"));
        assert!("cpu:1,,io"
            .parse::<LoadSpec>()
            .unwrap_err()
            .contains("empty item"));
        assert!("cpu@x".parse::<LoadSpec>().is_err());
    }

    proptest! {
        #[test]
        fn display_round_trips(n in 1u32..8, m in 1u32..8, cpus in proptest::collection::btree_set(0usize..8, 1..4)) {
            let cpus: Vec<usize> = cpus.into_iter().collect();
            let spec = LoadSpec { items: vec![
                LoadItem { kind: LoadKind::Cpu, count: n, cpus: Some(cpus) },
                LoadItem { kind: LoadKind::Io, count: m, cpus: None },
            ]};
            prop_assert_eq!(spec.to_string().parse::<LoadSpec>().unwrap(), spec);
        }
    }
}
