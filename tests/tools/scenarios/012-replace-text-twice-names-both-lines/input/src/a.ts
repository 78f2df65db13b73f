const a = 'Save';
const b = 1;
const c = 'Save';
