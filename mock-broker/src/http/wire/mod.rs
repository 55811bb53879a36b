//! The JSON shapes of the API: request bodies parsed with serde into the engine's typed
//! commands, and the engine's typed outcomes rendered back. The only place that knows
//! field names; the engine sees commands and answers outcomes.

pub mod browse;
pub mod ephemeral;
pub mod kv;
pub mod locks;
pub mod loose;
pub mod queues;
pub mod status;
pub mod streams;
pub mod timers;
pub mod traces;
pub mod txn;
