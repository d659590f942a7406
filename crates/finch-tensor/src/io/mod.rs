//! Reading and writing tensors: Matrix Market (`.mtx`) and FROSTT (`.tns`).
