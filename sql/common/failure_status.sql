-- The failure kind (gateway_request.status) of a call a provider refused or failed, from its HTTP status
-- (failed_http_status) and the provider's error type or code (failed_error_type), as docs/metrics.md defines the
-- kinds. An expression, filled into an adapter's mapping ({failure_status}), over the two columns it defines.
-- rejected: refused before any model work (a bad, unauthorized or too large request, a rate limit, an overload);
-- timeout: a status 408 or 504, or an error type that says timeout; error: anything else (a server error). Past a
-- timeout, the HTTP status decides where it is known, the error type otherwise.
CASE
    WHEN failed_http_status IN (408, 504) OR failed_error_type ILIKE '%timeout%' THEN 'timeout'
    WHEN failed_http_status BETWEEN 400 AND 499 OR failed_http_status IN (503, 529) THEN 'rejected'
    WHEN failed_http_status IS NOT NULL THEN 'error'
    WHEN failed_error_type IN ('invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error',
                               'request_too_large', 'rate_limit_error', 'overloaded_error', 'billing_error',
                               'rate_limit_exceeded', 'insufficient_quota', 'invalid_api_key',
                               'context_length_exceeded', 'model_not_found', 'rate_limit', 'overloaded',
                               'authentication_failed', 'invalid_request', 'batch_expired')
        THEN 'rejected'
    ELSE 'error'
END
