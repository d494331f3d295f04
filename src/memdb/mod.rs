//! In-memory database (MemDb).

/// placeholder
#[derive(Debug)]
pub struct MemDb;
