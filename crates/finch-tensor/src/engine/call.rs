//! Calling a compiled program by name: inputs given as `(name, tensor)` pairs, outputs
//! returned by name with typed views (`dense::<f64>("y")`), for code that embeds Finch-RS
//! rather than drive it from files.

use std::collections::HashMap;

use crate::algebra::NativeScalar;
use crate::error::{Error, Result};
use crate::notation::DeclKind;
use crate::tensor::Tensor;

use super::CompiledProgram;

/// The outputs of [`CompiledProgram::call`], by name.
#[derive(Clone, Debug, Default)]
pub struct Outputs(HashMap<String, Tensor>);

impl Outputs {
    /// The output `name`.
    pub fn get(&self, name: &str) -> Result<&Tensor> {
        self.0.get(name).ok_or_else(|| self.missing(name))
    }

    /// Takes the output `name` out.
    pub fn take(&mut self, name: &str) -> Result<Tensor> {
        match self.0.remove(name) {
            Some(t) => Ok(t),
            None => Err(self.missing(name)),
        }
    }

    /// Every entry of the output `name` (the fill where nothing is stored), in
    /// column-major order (the first index varies fastest), as `T`, which must be its
    /// element type.
    pub fn dense<T: NativeScalar>(&self, name: &str) -> Result<Vec<T>> {
        let t = self.typed::<T>(name)?;
        t.to_dense()?
            .data
            .into_iter()
            .map(|v| T::from_value(v).ok_or_else(|| wrong_type::<T>(name, t)))
            .collect()
    }

    /// The value of the scalar output `name`, as `T`, which must be its element type.
    pub fn scalar<T: NativeScalar>(&self, name: &str) -> Result<T> {
        let t = self.typed::<T>(name)?;
        if t.ndims() != 0 {
            return Err(Error::Program(format!(
                "the output `{name}` has {} modes, not a scalar; read it with `dense`",
                t.ndims()
            )));
        }
        T::from_value(t.get(&[])?).ok_or_else(|| wrong_type::<T>(name, t))
    }

    /// The outputs as a map from their names.
    pub fn into_map(self) -> HashMap<String, Tensor> {
        self.0
    }

    fn typed<T: NativeScalar>(&self, name: &str) -> Result<&Tensor> {
        let t = self.get(name)?;
        if t.element_type() != T::TYPE {
            return Err(wrong_type::<T>(name, t));
        }
        Ok(t)
    }

    fn missing(&self, name: &str) -> Error {
        let mut names: Vec<&str> = self.0.keys().map(String::as_str).collect();
        names.sort_unstable();
        Error::Program(format!(
            "no output `{name}` (the outputs are: {})",
            names.join(", ")
        ))
    }
}

fn wrong_type<T: NativeScalar>(name: &str, t: &Tensor) -> Error {
    Error::Program(format!(
        "the output `{name}` holds {}, not {}",
        t.element_type(),
        T::TYPE
    ))
}

impl CompiledProgram {
    /// Runs on the named inputs and returns the outputs by name. Every input the program
    /// declares must be given, in its declared format; outputs take the sizes the
    /// program's reads give them (use [`CompiledProgram::run`] to give shapes, or to keep
    /// output buffers across calls).
    ///
    /// ```
    /// use finch::{Engine, Program, Tensor};
    ///
    /// let spmv = Program::parse("
    ///     input  A :: Dense(SparseList(Element(0.0)))
    ///     input  x :: Dense(Element(0.0))
    ///     output y :: Dense(Element(0.0))
    ///     y .= 0
    ///     for j = _, i = _
    ///       y[i] += A[i, j] * x[j]
    ///     end
    /// ")?.compile(Engine::C)?;
    /// // A = [1 0 2; 0 3 0] as CSR: row pointers, column indices, values.
    /// let a = Tensor::from_csr(2, 3, vec![0usize, 2, 3], vec![0usize, 2, 1], vec![1.0, 2.0, 3.0])?;
    /// let x = Tensor::from_values(&[3], vec![1.0, 1.0, 1.0])?;
    /// let y = spmv.call([("A", a), ("x", x)])?.dense::<f64>("y")?;
    /// assert_eq!(y, [3.0, 3.0]);
    /// # Ok::<(), finch::Error>(())
    /// ```
    pub fn call<'a>(&self, inputs: impl IntoIterator<Item = (&'a str, Tensor)>) -> Result<Outputs> {
        let mut tensors: HashMap<String, Tensor> = HashMap::new();
        for (name, t) in inputs {
            match self.program.decl(name).map(|d| d.kind) {
                Some(DeclKind::Input) => {}
                Some(_) => {
                    return Err(Error::Program(format!(
                        "`{name}` is not an input of the program (it is written by it)"
                    )))
                }
                None => {
                    return Err(Error::Program(format!(
                        "the program declares no tensor `{name}`"
                    )))
                }
            }
            if tensors.insert(name.to_string(), t).is_some() {
                return Err(Error::Program(format!("the input `{name}` is given twice")));
            }
        }
        self.run(&mut tensors, &HashMap::new())?;
        let outputs = tensors
            .into_iter()
            .filter(|(name, _)| {
                self.program
                    .decl(name)
                    .is_some_and(|d| d.kind == DeclKind::Output)
            })
            .collect();
        Ok(Outputs(outputs))
    }
}
