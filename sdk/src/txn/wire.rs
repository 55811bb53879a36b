//! The transaction body as `commit()` sends it: borrowed views of the builder's parts,
//! serialised straight to bytes. No JSON tree is built on the way and no payload is
//! copied; `to_body()` parses the bytes back when a caller wants to look at them.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::value::RawValue;

use super::ops::Position;
use crate::kv::KvWire;
use crate::timers::TimerWire;

/// `POST /api/v1/transaction`'s body. Empty parts are left out, as the broker expects.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Body<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<Op<'a>>,
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub required_leases: BTreeSet<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kv: Vec<KvWire<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timers: Vec<TimerWire<'a>>,
    #[serde(skip_serializing_if = "<[Position]>::is_empty")]
    pub positions: &'a [Position],
}

/// One entry of `operations`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum Op<'a> {
    /// An ack of a popped message.
    Ack(Ack<'a>),
    /// A push of one item.
    Push {
        /// The item (the builder pushes one per operation).
        items: [PushItem<'a>; 1],
    },
}

/// An ack operation.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Ack<'a> {
    pub transaction_id: &'a str,
    pub partition_id: &'a str,
    pub consumer_group: &'a str,
    pub status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
}

/// A pushed item.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PushItem<'a> {
    pub queue: &'a str,
    pub partition: &'a str,
    pub transaction_id: String,
    pub payload: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<&'a str>,
}
