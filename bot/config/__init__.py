"""The bot's configuration in the database: its versions (``store``), how large one may be
(``limits``), and which version each node runs (``nodes``). The node follows the versions;
the admin API writes them: both use this package, neither through the other."""
