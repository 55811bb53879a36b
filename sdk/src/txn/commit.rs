//! Sending a step and reading its answer.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Commit, Committed, Gate, GateKind, TransactionBuilder};
use crate::error::{Capability, Error, Result, RollbackReason};

impl TransactionBuilder {
    /// Validates, sends, and decodes the outcome.
    ///
    /// A lost `required` gate is [`Commit::Gated`]; any other rollback is
    /// [`Error::RolledBack`].
    ///
    /// A 5xx or a lost connection is retried, and a resend never applies the step
    /// twice: only what the first commit leaves behind guards a resend. A push (its
    /// `transactionId` is the same in the resend: `duplicate`), a
    /// [`once`](TransactionBuilder::once) marker, or nothing to repeat (`completed`
    /// acks alone) does; a fenced ack does not (acking one message of a batch keeps
    /// the lease while the rest is leased), nor does a `required` condition or a lock's
    /// guard. Every other step carries the SDK's step marker
    /// ([`crate::STEP_MARKER_NS`]), a `required` `putIfAbsent` first among its KV
    /// operations: a resend after a commit answers [`Commit::Gated`] with
    /// [`GateKind::Step`]. When a resend rolls back as `duplicate` or `rejected_ack`,
    /// or is gated, the outcome says `retried: true`: the first attempt most probably
    /// committed (certainly, for a [`GateKind::Step`] gate). A step guarded for this
    /// call only (its marker, or a push id, minted for it) whose last attempt may have
    /// applied answers [`Error::OutcomeUnknown`]; so does any step that nothing guards
    /// on a broker without KV. [`TransactionBuilder::resend`] chooses another policy.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// # let msg = client.pop::<serde_json::Value>("orders").send().await?.remove(0);
    /// use queen_mock_broker::harness::Fault;
    /// use queen_sdk::{AckStatus, Commit, Error};
    /// let step = client.transaction().ack(&msg).push("receipts", |p| p.payload(&"receipt for o-7"));
    /// // The broker commits the step, then the connection drops before the answer.
    /// broker.faults().inject(Fault::commit_then_drop().on("/api/v1/transaction"));
    /// match step.commit().await {
    ///     Ok(Commit::Committed(c)) => println!("committed {}", c.transaction_id),
    ///     // Already done (a `once` marker exists): its ack rolled back with it; settle
    ///     // the message on its own.
    ///     Ok(Commit::Gated { gate, .. }) if gate.already_done() => {
    ///         client.ack(&msg, AckStatus::Completed).await?;
    ///     }
    ///     // Refused by another gate: nothing written and nothing done.
    ///     Ok(Commit::Gated { gate, .. }) => println!("refused: {gate}"),
    ///     // The fenced, deterministic step was retried, and the retry found it done
    ///     // (its first attempt's ack applied).
    ///     Err(Error::RolledBack { retried: true, reason, .. }) => println!("done before ({reason})"),
    ///     Err(e) => return Err(e.into()),
    /// }
    /// assert_eq!(broker.inspect().messages("receipts", "Default")?.len(), 1); // pushed once
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn commit(self) -> Result<Commit> {
        let outcome = self.send().await;
        // Held locks go once the commit has answered, whatever it answered.
        for held in &self.held {
            held.release().await;
        }
        outcome
    }

    async fn send(&self) -> Result<Commit> {
        if !self.held.is_empty() {
            // The held locks' guards as of now, named in a refusal like any other gate.
            return Box::pin(self.with_held_guards().send()).await;
        }
        // A part the broker is known to drop: refused before anything is sent.
        if let Some(capability) = self.v2_parts().find(|c| self.client.lacks(*c)) {
            return Err(Error::Unsupported {
                capability,
                committed: false,
            });
        }
        let guard = self.guard_for_resend()?;
        let marker = guard.marker();
        let body = self.render(marker)?;
        let answer = self
            .client
            .post("/api/v1/transaction", body, guard.replay(self.resend))
            .await?;
        // The marker is the first KV slot, after the acks and pushes; the caller's own
        // KV operations keep their indices.
        let marker_slot = marker.map(|_| self.ops.len());
        let mut commit = decode_commit(&answer, |slot, reason, version, value| {
            let kv_slot = slot.saturating_sub(self.ops.len());
            match (marker, kv_slot.checked_sub(usize::from(marker.is_some()))) {
                (Some(m), None) => {
                    Gate::of(slot, 0, Some((m, GateKind::Step)), reason, version, value)
                }
                (_, index) => {
                    let index = index.unwrap_or(kv_slot);
                    let op = self.kv.get(index).map(|(op, kind)| (op, *kind));
                    let mut gate = Gate::of(slot, index, op, reason, version, value);
                    if let (GateKind::Once, Some(e)) = (gate.kind, &self.epoch) {
                        gate.key = e.marker_key(&gate.key); // the key it is stored under
                    }
                    gate
                }
            }
        })?;
        // A Queen v0 broker ignores `kv`, `timers` and `positions` and commits the rest;
        // Queen 2's engine ignores `positions`. Their results are then missing: say so
        // instead of reporting a commit of parts that were never applied, and refuse
        // those parts (and only those) from now on.
        if let Commit::Committed(c) = &commit {
            let asked: Vec<Capability> = self
                .v2_parts()
                .chain(marker.map(|_| Capability::Kv))
                .filter(|cap| !self.client.has(*cap))
                .collect();
            if !asked.is_empty() {
                let came_back = c.v2_results();
                let mut dropped = None;
                for cap in asked {
                    if came_back & cap.bit() != 0 {
                        self.client.learn_has(cap);
                    } else {
                        self.client.learn_lacks(cap);
                        // Only the step marker dropped: what the caller asked for applied.
                        if dropped.is_none() && self.v2_parts().any(|p| p == cap) {
                            dropped = Some(cap);
                        }
                    }
                }
                if let Some(capability) = dropped {
                    return Err(Error::Unsupported {
                        capability,
                        committed: true,
                    });
                }
            }
        }
        if let (Some(slot), Commit::Committed(c)) = (marker_slot, &mut commit) {
            c.hide_slot(slot);
        }
        Ok(commit)
    }

    /// The Queen 2 parts (KV, timers, positions) this transaction carries, in that
    /// order.
    fn v2_parts(&self) -> impl Iterator<Item = Capability> + '_ {
        [
            (!self.kv.is_empty()).then_some(Capability::Kv),
            (!self.timers.is_empty()).then_some(Capability::Timers),
            (!self.positions.is_empty()).then_some(Capability::Positions),
        ]
        .into_iter()
        .flatten()
    }
}

/// A transaction answer's envelope, decoded from its bytes; the per-step results are
/// only checked to be a JSON array here, and decoded when first read
/// ([`Committed::results`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommitAnswer<'a> {
    transaction_id: Option<String>,
    success: Option<bool>,
    reason: Option<String>,
    error: Option<String>,
    #[serde(borrow, default, deserialize_with = "raw_array")]
    results: Option<&'a RawValue>,
    // A lost `required` gate (`kv_precondition`).
    failed_index: Option<u64>,
    kv_reason: Option<String>,
    version: Option<u64>,
    value: Option<Value>,
}

/// `results` as its text, refused (as a typed decode would) unless it is an array or
/// `null`.
fn raw_array<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    let raw = <&RawValue>::deserialize(d)?;
    match raw.get().as_bytes().first() {
        Some(b'[') => Ok(Some(raw)),
        Some(b'n') => Ok(None),
        _ => Err(serde::de::Error::custom("results is not an array")),
    }
}

/// Where `text` lies in `body`, if it is a slice of it.
fn span_in(body: &[u8], text: &str) -> Option<std::ops::Range<usize>> {
    let start = (text.as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
    let span = start..start.checked_add(text.len())?;
    let inner = body.get(span.clone())?;
    std::ptr::eq(inner.as_ptr(), text.as_ptr()).then_some(span)
}

/// Decodes a transaction answer; `gate` names the gate of a `kv_precondition` rollback
/// from its slot, reason, version and value.
fn decode_commit(
    answer: &crate::client::Answer,
    gate: impl FnOnce(usize, &str, Option<u64>, Option<Value>) -> Gate,
) -> Result<Commit> {
    let retried = answer.maybe_applied_before;
    let b: CommitAnswer<'_> = answer.decode_borrowed("transaction answer")?;
    let id = b.transaction_id.unwrap_or_default();
    match b.success {
        Some(true) => {
            // The results' place in the body they were borrowed from (`decode_borrowed`
            // reads the body in place); a copy of their text should they ever not be.
            let (body, span) = match b.results.map(RawValue::get) {
                None => (answer.body.clone(), 0..0),
                Some(text) => match span_in(&answer.body, text) {
                    Some(span) => (answer.body.clone(), span),
                    None => (
                        bytes::Bytes::copy_from_slice(text.as_bytes()),
                        0..text.len(),
                    ),
                },
            };
            Ok(Commit::Committed(Committed::from_answer(
                id, retried, body, span,
            )))
        }
        Some(false) => {
            // Queen v0 rolls back with an `error` text and no `reason`: classify the text.
            let reason = match b.reason.as_deref() {
                Some(r) => RollbackReason::parse(r),
                None => RollbackReason::from_error_text(b.error.as_deref().unwrap_or("")),
            };
            if reason == RollbackReason::KvPrecondition {
                let gate = gate(
                    b.failed_index.unwrap_or(0) as usize,
                    b.kv_reason.as_deref().unwrap_or_default(),
                    b.version,
                    b.value.filter(|v| !v.is_null()),
                );
                return Ok(Commit::Gated {
                    transaction_id: id,
                    gate,
                    retried,
                });
            }
            Err(Error::RolledBack {
                reason,
                error: b.error.unwrap_or_default(),
                retried,
            })
        }
        None => Err(Error::Decode {
            message: "a transaction answer without success".into(),
            body: answer.text(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::span_in;

    #[test]
    fn results_borrowed_from_the_body_are_found_where_they_lie_and_a_copy_is_not() {
        let body = br#"{"results":[1,2]}"#;
        let borrowed = std::str::from_utf8(&body[11..16]).unwrap();
        assert_eq!(borrowed, "[1,2]");
        assert_eq!(span_in(body, borrowed), Some(11..16));
        let copy = String::from(borrowed);
        assert_eq!(span_in(body, &copy), None);
        // A slice running past the body's end is not in it.
        let longer = br#"{"results":[1,2]} and more"#;
        let past = std::str::from_utf8(&longer[11..22]).unwrap();
        assert_eq!(span_in(&longer[..17], past), None);
    }
}
