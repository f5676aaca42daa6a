"""Data the course runs on with no network: generated toy tasks, and (later chapters) embedded corpora."""
