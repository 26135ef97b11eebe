pub struct Sbom;
pub struct Component;
pub enum SbomFormat {}
#[derive(Debug)]
pub struct SbomError;
