//! Measurements (to come).
