//! Experiments.
