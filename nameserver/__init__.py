"""The graymq name server: broker registry and topic routes, per-client grayFlags, gray switches,
gray rules, cutover records and the audit log, served over REST and stored in a SQL database."""
