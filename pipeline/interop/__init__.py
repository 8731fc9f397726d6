"""audioscale and the field's other tools: an audioscale checkpoint offered through the HEAR 2021 API
and as an X-ARES encoder, and any HEAR-API module scored the way a study checkpoint is."""
