//! The dense reference interpreter (Finch paper Fig. 8b): the test oracle.
