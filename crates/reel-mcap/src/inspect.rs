#[derive(Debug)]
pub struct ChunkSummary;
#[derive(Debug)]
pub struct GopStats;
#[derive(Debug)]
pub struct GroupSummary;
#[derive(Debug)]
pub struct LayoutReport;
pub fn inspect() {}
