"""Beyond the test split's tables: shift, OOD, prediction sets; which runs have which sets."""
