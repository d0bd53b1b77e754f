SELECT ring, slot, state, generation, row_count, current_slot, current_generation
FROM {schema}.storage_status()
