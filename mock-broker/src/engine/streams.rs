//! The rules of the stream runner's routes (`/streams/v1/*`): query registration, claims, cycles, state.
