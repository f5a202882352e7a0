"""What tools/check_provider_history.py re-derives rdma-core's provider history with:
git access and the release tags (:mod:`git`), a small C preprocessor (:mod:`ctokens`,
:mod:`cexpr`, :mod:`cpp`), the extraction of one release's provider tables
(:mod:`extract`), the history across releases (:mod:`history`) and the data file
derived from it (:mod:`data_file`)."""
