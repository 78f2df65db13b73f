const a = 2;
export default a;