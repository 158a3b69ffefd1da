"""What every request meets before a view acts: authentication and scopes, body limits, the JSON guards and parser, rate limits, sign-in lockouts, the security headers, Idempotency-Key."""
