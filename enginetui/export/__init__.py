"""`enginetui export FILE --format perfetto|csv OUT`: a recording as a Perfetto trace or CSV tables."""
