//! The watchdog holds the lease (DESIGN §10.8): a supervisor stopped alone leaves no child
//! beside a successor's. Real processes, as in `cli_supervise.rs`.

mod cli_support;
