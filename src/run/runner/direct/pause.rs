//! How a direct stage's failure becomes a typed pause: the code, whether the driver may retry
//! the attempt once (transient transport failures), and when a rate limit resets.

use chrono::{DateTime, Utc};

use crate::direct::http::HttpFailure;
use crate::direct::runtime::DirectFailure;
use crate::pause::PauseCode;

/// The pause a failure becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailurePause {
    pub code: PauseCode,
    pub retryable_transport: bool,
    pub resume_after: Option<DateTime<Utc>>,
}

/// Maps `failure` (at `now`, for retry-after seconds) to its pause.
pub fn pause_for(failure: &DirectFailure, now: DateTime<Utc>) -> FailurePause {
    let plain = |code| FailurePause {
        code,
        retryable_transport: false,
        resume_after: None,
    };
    match failure {
        DirectFailure::Http(http) => match http {
            HttpFailure::RateLimited { retry_after, .. } => FailurePause {
                code: PauseCode::PausedRateLimit,
                retryable_transport: false,
                resume_after: retry_after.as_deref().and_then(|hint| {
                    super::super::resume_after_from_hint(hint, now).or_else(|| {
                        DateTime::parse_from_rfc2822(hint)
                            .ok()
                            .map(|t| t.with_timezone(&Utc))
                    })
                }),
            },
            HttpFailure::Server {
                status: 503 | 529, ..
            } => plain(PauseCode::PausedProviderCapacity),
            HttpFailure::Server { .. } | HttpFailure::Timeout(_) | HttpFailure::Transport(_) => {
                FailurePause {
                    code: PauseCode::PausedProviderUncertain,
                    retryable_transport: true,
                    resume_after: None,
                }
            }
            HttpFailure::Client {
                status: 401 | 403, ..
            } => plain(PauseCode::PausedBillingRoute),
            HttpFailure::Client { .. } | HttpFailure::Redirect { .. } | HttpFailure::Body(_) => {
                plain(PauseCode::PausedProviderUncertain)
            }
        },
        DirectFailure::Protocol(_) | DirectFailure::ToolFlood { .. } => {
            plain(PauseCode::PausedInvalidOutput)
        }
        DirectFailure::ResponseLimit(_) => plain(PauseCode::PausedInvalidOutput),
        // A context too full for a response is the same limit seen earlier: raise the server's
        // context or lower the endpoint's response cap.
        DirectFailure::OutputCap(_) | DirectFailure::ContextFull { .. } => {
            plain(PauseCode::PausedOutputCap)
        }
        DirectFailure::ContentFilter => plain(PauseCode::PausedContentFilter),
        DirectFailure::Budget => plain(PauseCode::PausedBudget),
        DirectFailure::Boundary(_) | DirectFailure::Unverified(_) => {
            plain(PauseCode::PausedProcessCleanup)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn failures_become_their_pauses() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
        let limited = pause_for(
            &DirectFailure::Http(HttpFailure::RateLimited {
                retry_after: Some("30".into()),
                message: String::new(),
            }),
            now,
        );
        assert_eq!(limited.code, PauseCode::PausedRateLimit);
        assert_eq!(
            limited.resume_after,
            Some(Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 30).unwrap())
        );
        let server = pause_for(
            &DirectFailure::Http(HttpFailure::Server {
                status: 500,
                message: String::new(),
            }),
            now,
        );
        assert!(server.retryable_transport);
        assert_eq!(
            pause_for(
                &DirectFailure::Http(HttpFailure::Redirect {
                    status: 302,
                    location: "x".into()
                }),
                now
            )
            .code,
            PauseCode::PausedProviderUncertain
        );
        assert_eq!(
            pause_for(&DirectFailure::ToolFlood { calls: 9, max: 8 }, now).code,
            PauseCode::PausedInvalidOutput
        );
    }
}
