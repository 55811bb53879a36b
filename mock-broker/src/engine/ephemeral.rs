//! The rules of ephemeral queues (`/api/v1/ephemeral/*`): in-memory queues with their own push, pop and ack.
