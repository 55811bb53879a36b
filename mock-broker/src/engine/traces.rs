//! The rules of traces (`/api/v1/traces*`): recording and reading trace events.
