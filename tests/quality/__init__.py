"""Quality: the checks and properties catch what they claim to catch."""
