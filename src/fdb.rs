//! FoundationDB adapter.
