//! The rules of reading and handling messages by hand: listing, retry, delete, `/api/v1/fetch`, `/api/v1/partitions/changed`.
