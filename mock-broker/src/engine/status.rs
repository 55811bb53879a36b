//! The rules of status, analytics and stats (`/api/v1/status*`, `/api/v1/analytics/*`, `/api/v1/stats/refresh`).
