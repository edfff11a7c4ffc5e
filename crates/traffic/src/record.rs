//! Recording (to come).
