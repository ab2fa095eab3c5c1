# Models arrive with their issue; the app exists so the layout is stable.
