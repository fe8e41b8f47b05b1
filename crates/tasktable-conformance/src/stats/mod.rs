//! Statistics per queue and kind: throughput, success rate, waits and run times, and a
//! series per minute, the same whether read from raw rows or from rollups.

pub mod throughput;
